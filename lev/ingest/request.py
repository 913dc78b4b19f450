"""The first step of every ingest: what was asked (`IngestRequest`), checked and resolved (`Resolved`): the filing
principal, the kind the URL says, its canonical form; for a page captured in the user's browser, its HTML checked
(an HTML document of at most 5 MiB of UTF-8). Nothing is fetched or stored here."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from lev.auth.policy import Principal, filing_target, require, require_filer
from lev.core import sourcepath, weburl
from lev.core.errors import file_too_large, ingest_failed, invalid_body, transcription_unavailable
from lev.ingest import youtube
from lev.ingest.formats import INLINE_KINDS
from lev.ingest.urls import canonical_url, classify_media_url
from lev.net.guard import check_host
from lev.plumbing.deps import Deps
from lev.store import lifecycle
from lev.store import members as member_store
from lev.tags.names import check_names

MAX_TEXT_CHARS = 1_000_000

MAX_URL_CHARS = 4096
MAX_HTML_BYTES = 5 * 1024 * 1024  # 5242880 bytes of UTF-8: a captured page as the browser rendered it
# The request body that carries it: JSON escaping (quotes, backslashes, newlines) can double the HTML's size.
MAX_PAGE_BODY_BYTES = 2 * MAX_HTML_BYTES + 1024 * 1024
# An HTML document has at least one of these elements; plain text, JSON or another XML vocabulary has none.
_HTML_TAG = re.compile(
    r"<\s*(?:!doctype\s+html|html|head|body|title|meta|article|main|section|div|span|p|h[1-6]|a|ul|ol|li|table|"
    r"pre|blockquote|br|img|header|footer|nav|form|em|strong|b|i|code|figure|dl)[\s/>]", re.IGNORECASE)


@dataclass(frozen=True)
class IngestRequest:
    """POST /api/v1/ingest and MCP add_to_knowledge, as the caller sent them."""

    kind: str
    url: str | None = None
    text: str | None = None
    title: str | None = None
    in_kb: bool = True
    auto_transform: bool = False
    folder_id: uuid.UUID | None = None
    html: str | None = None  # kind page: the page as the user's browser rendered it
    captured: str = "browser"  # kind page: where its HTML came from (a feed: the entry's own text in it)
    source_url: str | None = None  # kind text: the page a selection was taken from, kept in the item's metadata
    tags: tuple[str, ...] = ()  # as sent; checked by `resolve`


@dataclass(frozen=True)
class FileAt:
    """A file kept by its path (a ZIP's member, a synced file): its source path and the SHA-256 of its bytes."""

    path: str
    sha256: str
    size: int


def source_path(value: str, field: str = "source_path") -> str:
    """A file's path as Lev keeps it (lev.core.sourcepath), or 400 invalid_body saying why not."""
    why = sourcepath.problem(value)
    if why is not None:
        raise invalid_body(f"{field} {why}.")
    return value


@dataclass(frozen=True)
class Resolved:
    """A checked request: `kind` is what the item will be (text, url, youtube, pdf, audio, video, or page: a page
    captured in the user's browser, with its `html`; markdown, html, email, spreadsheet: a text format sent inline,
    its `text`); `canonical` the key a URL's content is shared by (a captured
    page's own key, never shared); `principal` files new items where they belong."""

    principal: Principal
    kind: str
    title: str | None
    in_kb: bool
    auto_transform: bool
    url: str | None = None
    canonical: str | None = None
    text: str | None = None
    source_url: str | None = None
    html: bytes | None = None
    captured: str = "browser"  # kind page: where its HTML came from (the item's metadata says)
    file: FileAt | None = None  # an upload kept by its path: a new item there, or its item updated in place
    tags: tuple[str, ...] = ()  # in their one form (lev.tags.names), each once


async def resolve(deps: Deps, principal: Principal, req: IngestRequest) -> Resolved:
    """400 for a malformed request, 403/404 for a folder the caller cannot file into, else the resolved request."""
    require(principal, "write")
    names = tuple(check_names(list(req.tags)))
    resolved = await _resolve(deps, principal, req)
    return replace(resolved, tags=names) if names else resolved


async def _resolve(deps: Deps, principal: Principal, req: IngestRequest) -> Resolved:
    fields = (("url", req.url), ("text", req.text), ("title", req.title), ("source_url", req.source_url),
              ("html", req.html))
    for name, value in fields:
        if value is not None and "\x00" in value:  # PostgreSQL text cannot hold NUL
            raise invalid_body(f"{name} must not contain NUL characters.")
    if req.html is not None and req.kind != "page":
        raise invalid_body("only kind 'page' takes `html`.")
    title = req.title.strip() or None if req.title else None
    if req.kind == "text":
        text = _text(req)
        source_url = check_source_url(req.source_url, "source_url") if req.source_url is not None else None
        filer = await filing(deps, principal, req.folder_id)
        return Resolved(filer, "text", title, req.in_kb, req.auto_transform, text=text, source_url=source_url)
    if req.kind in INLINE_KINDS:
        text = _text(req)
        filer = await filing(deps, principal, req.folder_id)
        return Resolved(filer, req.kind, title, req.in_kb, req.auto_transform, text=text)
    if req.source_url is not None:
        raise invalid_body("only kind 'text' takes `source_url`.")
    if req.kind == "url":
        url = _url(req)
        filer = await filing(deps, principal, req.folder_id)
        return await _resolve_url(deps, filer, url, title, req.in_kb, req.auto_transform)
    if req.kind == "page":
        url, html = _page(req)
        filer = await filing(deps, principal, req.folder_id)
        return Resolved(filer, "page", title, req.in_kb, req.auto_transform, url=url, canonical=canonical_url(url),
                        html=html, captured=req.captured)
    raise invalid_body(f"kind must be 'url', 'text', 'page' or one of {', '.join(map(repr, INLINE_KINDS))}.")


def _text(req: IngestRequest) -> str:
    """The text of kind text (a snippet) or of a text format sent inline (Markdown, HTML, an e-mail, CSV)."""
    if req.url is not None:
        raise invalid_body(f"kind '{req.kind}' takes `text`, not `url`.")
    if req.text is None or not req.text.strip():
        raise invalid_body(f"kind '{req.kind}' needs a non-empty `text`.")
    if len(req.text) > MAX_TEXT_CHARS:
        raise invalid_body(f"text is limited to {MAX_TEXT_CHARS} characters.")
    return req.text


def _url(req: IngestRequest) -> str:
    if req.text is not None:
        raise invalid_body("kind 'url' takes `url`, not `text`.")
    if not req.url or not req.url.strip():
        raise invalid_body("kind 'url' needs a `url`.")
    return weburl.http_url(req.url, "url", max_chars=MAX_URL_CHARS)


def _page(req: IngestRequest) -> tuple[str, bytes]:
    """A captured page's URL and UTF-8 HTML, or 400 invalid_body (no URL, not http(s), no HTML, not an HTML document)
    or 413 file_too_large (HTML past 5 MiB of UTF-8, with `maxBytes`)."""
    if req.text is not None:
        raise invalid_body("kind 'page' takes `html`, not `text`.")
    if req.url is None:
        raise invalid_body("kind 'page' needs the page's `url`.")
    url = check_source_url(req.url)
    if req.html is None or not req.html.strip():
        raise invalid_body("kind 'page' needs the page's `html`, as the browser rendered it.")
    data = req.html.encode("utf-8")
    if len(data) > MAX_HTML_BYTES:
        raise file_too_large(f"A page's HTML is limited to {MAX_HTML_BYTES} bytes (5 MiB) of UTF-8; this one has "
                             f"{len(data)}.", MAX_HTML_BYTES)
    if not _HTML_TAG.search(req.html):
        raise invalid_body("html is not an HTML document (no HTML element found).")
    return url, data


def check_source_url(url: str, field: str = "url") -> str:
    """An http(s) URL of at most 4096 characters, trimmed; 400 invalid_body otherwise (a captured page's URL, the
    page a selection came from)."""
    return weburl.http_url(url, field, max_chars=MAX_URL_CHARS)


async def filing(deps: Deps, principal: Principal, folder_id: uuid.UUID | None) -> Principal:
    """The principal filing into `folder_id`: 403 forbidden_scope outside a scoped token's folders or for a viewer of
    a shared folder, 404 folder_not_found (with `missing`) when the user can reach no such folder."""
    filing = filing_target(principal, folder_id)
    target = filing.new_item_folder  # asked for, or a single-folder token's (a shared folder it may only read)
    if target is not None:
        async with deps.db.read_session() as s:
            require_filer(await member_store.role_of(s, principal.user_id, target), target)
    return filing


async def _resolve_url(deps: Deps, principal: Principal, url: str, title: str | None, in_kb: bool,
                       auto_transform: bool) -> Resolved:
    kind = classify_media_url(url) or "url"
    if kind == "youtube":
        # yt-dlp does its own networking and cannot use the guarded transport: at least the YouTube host itself
        # must resolve to public addresses (the URL was already matched against YouTube's hosts).
        parts = urlsplit(url)
        await check_host(deps.outbound, parts.hostname or "www.youtube.com", parts.port or 443)
        canonical = youtube.canonical_url(url)
        return Resolved(principal, kind, title, in_kb, auto_transform, url=canonical, canonical=canonical)
    if kind in lifecycle.RECORDINGS and deps.transcriber is None:
        raise transcription_unavailable()
    try:
        canonical = canonical_url(url)
    except ValueError:
        raise ingest_failed("the URL cannot be parsed") from None
    return Resolved(principal, kind, title, in_kb, auto_transform, url=url, canonical=canonical)
