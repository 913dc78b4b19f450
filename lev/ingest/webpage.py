"""Web pages for URL ingest: fetched through the guarded client, readable text and metadata by trafilatura."""

from __future__ import annotations

import asyncio
import html
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from lev.core import charsets
from lev.core.errors import ApiError, ingest_failed
from lev.ingest.urls import canonical_url
from lev.net.guard import USER_AGENT, guarded_client, open_url
from lev.plumbing import offload
from lev.plumbing.ports import Outbound

MAX_BYTES = 20 * 1024 * 1024
MAX_TEXT_CHARS = 1_000_000  # what a page's text keeps: the most a note may hold
MAX_ARCHIVED_BYTES = 5 * 1024 * 1024  # a larger page gets no archived copy (lev.archive.snapshot.MAX_SOURCE_BYTES)
MIN_TEXT_CHARS = 200
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/plain"})

TITLE_SCAN_CHARS = 200_000  # where a page's own <title> is looked for when trafilatura finds none
_TITLE_END = re.compile(r"</title\s*>")


class UnsupportedMedia(ApiError):
    """The URL serves a PDF, audio or video rather than a page; the caller routes it to the media pipeline."""

    def __init__(self, kind: str, content_type: str) -> None:
        super().__init__("ingest_failed", "PDF/audio/video URLs are not supported yet")
        self.kind = kind
        self.content_type = content_type


@dataclass
class FetchedPage:
    url: str  # final URL after redirects
    canonical: str
    title: str | None
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    content_type: str = "text/html"
    headings: tuple[str, ...] = ()
    html: bytes | None = None  # the page as served (at most MAX_ARCHIVED_BYTES): what its archived copy is made of
    charset: str | None = None  # as its server named it


@dataclass(frozen=True)
class Readable:
    """What trafilatura reads of a page: its title, text, metadata and section headings (in order)."""

    title: str | None
    text: str
    metadata: dict[str, Any]
    headings: tuple[str, ...] = ()


def _media_kind(content_type: str) -> str | None:
    if content_type == "application/pdf":
        return "pdf"
    if content_type.startswith("audio/"):
        return "audio"
    if content_type.startswith("video/"):
        return "video"
    return None


def _charset(header: str) -> str | None:
    for param in header.split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    return None


async def _read_capped(resp: httpx.Response, max_bytes: int) -> bytes:
    declared = resp.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ingest_failed(f"page larger than {max_bytes // (1024 * 1024)} MB")
    buf = bytearray()
    async for piece in resp.aiter_bytes():
        buf += piece
        if len(buf) > max_bytes:
            raise ingest_failed(f"page larger than {max_bytes // (1024 * 1024)} MB")
    return bytes(buf)


def extract_html(body: bytes, url: str) -> Readable:
    """A page's title, readable text, metadata and headings (trafilatura; the <title> when it finds no title).
    CPU-bound: callers run it in a thread. Used for fetched pages and for pages captured in the user's browser
    alike."""
    import trafilatura

    doc = trafilatura.bare_extraction(
        body,
        url=url,
        favor_recall=True,
        include_tables=True,
        include_comments=False,
        include_images=False,
        include_links=False,
        with_metadata=True,
    )
    text = ""
    title: str | None = None
    meta: dict[str, Any] = {}
    headings: tuple[str, ...] = ()
    if doc is not None and not isinstance(doc, dict):
        text = doc.text or ""
        title = doc.title or None
        if doc.body is not None:
            headings = tuple(" ".join("".join(h.itertext()).split()) for h in doc.body.iter("head"))
        for key in ("author", "date", "sitename", "description", "hostname"):
            value = getattr(doc, key, None)
            if isinstance(value, str) and value.strip():
                meta[key] = value.strip()
    if not title:
        title = page_title(body[:TITLE_SCAN_CHARS].decode("utf-8", errors="replace"))
    text = text.strip()
    return Readable(title, _cut(text[:MAX_TEXT_CHARS].rstrip(), meta, len(text)), meta, tuple(h for h in headings if h))


def page_title(head: str) -> str | None:
    """The text of the first `<title ...>…</title>` in `head`, in one pass (a pattern searched from every `<title`
    is quadratic: 28,000 unclosed `<title>` in 200,000 characters held a reader for minutes)."""
    lower = head.lower()
    start = lower.find("<title")
    if start < 0:
        return None
    opened = lower.find(">", start)
    if opened < 0:
        return None
    end = _TITLE_END.search(lower, opened + 1)
    if end is None:
        return None
    return " ".join(html.unescape(head[opened + 1:end.start()]).split()) or None


def plain_text(body: bytes, charset: str | None) -> tuple[str, int]:
    """A text/plain page's text, at most MAX_TEXT_CHARS of it, and how many characters it had: decoded in its
    declared charset when that is a one-pass text encoding (else UTF-8). Run off the event loop: 20 MB take a
    while to decode and strip."""
    text = charsets.decode(body, charset).strip()
    return text[:MAX_TEXT_CHARS].strip(), len(text)


def _cut(text: str, meta: dict[str, Any], chars: int) -> str:
    """A page's text kept to MAX_TEXT_CHARS (what a note may hold), its whole length said in the metadata."""
    if chars > MAX_TEXT_CHARS:
        meta["text_cut_from_chars"] = chars
    return text


async def read_html(body: bytes, url: str) -> Readable:
    """`extract_html` in a child process (trafilatura holds the GIL for seconds on a large page); 400 ingest_failed
    when the page kills its reader."""
    try:
        return await offload.run(extract_html, body, url, size=len(body))
    except offload.OffloadFailed:
        raise ingest_failed("the page could not be read (its reader stopped)") from None


async def _fetch(outbound: Outbound, url: str, connect_timeout: float, read_timeout: float,
                 max_bytes: int) -> FetchedPage:
    headers = {
        "User-Agent": USER_AGENT,
        "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
        "Accept-Language": "en;q=0.9,*;q=0.5",
    }
    timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
    async with guarded_client(outbound, timeout, headers) as client, open_url(client, url) as resp:
        raw_type = resp.headers.get("content-type", "")
        ctype = raw_type.split(";", 1)[0].strip().lower() or "text/html"
        kind = _media_kind(ctype)
        if kind is not None:
            raise UnsupportedMedia(kind, ctype)
        if ctype not in HTML_TYPES and ctype not in TEXT_TYPES:
            raise ingest_failed(f"unsupported content type {ctype} (only web pages and plain text)")
        body = await _read_capped(resp, max_bytes)

    final = str(resp.url.copy_with(fragment=None))
    if ctype in TEXT_TYPES:
        text, chars = await offload.run(plain_text, body, _charset(raw_type), size=len(body))
        if not text:
            raise ingest_failed("the page is empty")
        segment = resp.url.path.rstrip("/").rsplit("/", 1)[-1]
        host = resp.url.host
        title = segment or host or None
        meta: dict[str, Any] = {"hostname": host}
        return FetchedPage(final, canonical_url(final), title, _cut(text, meta, chars), meta, ctype)

    page = await read_html(body, final)
    meta = dict(page.metadata)
    if resp.url.host:
        meta.setdefault("hostname", resp.url.host)
    if len(page.text) < MIN_TEXT_CHARS:
        raise ingest_failed("page has no readable text; it may need a login or be paywalled")
    return FetchedPage(final, canonical_url(final), page.title, page.text, meta, ctype, page.headings,
                       body if len(body) <= MAX_ARCHIVED_BYTES else None, _charset(raw_type))


async def fetch_page(
    outbound: Outbound,
    url: str,
    *,
    connect_timeout: float = 5.0,
    read_timeout: float = 15.0,
    total_timeout: float = 30.0,
    max_bytes: int = MAX_BYTES,
) -> FetchedPage:
    """Fetch `url` (http/https only, at most 5 redirects, 20 MB) and extract title, text and metadata.

    Raises `ingest_failed` with a descriptive message, or `UnsupportedMedia` for PDF/audio/video.
    """
    try:
        async with asyncio.timeout(total_timeout):
            return await _fetch(outbound, url, connect_timeout, read_timeout, max_bytes)
    except TimeoutError as exc:
        raise ingest_failed(f"the page took longer than {total_timeout:g} s to fetch") from exc
