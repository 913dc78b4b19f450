"""One self-contained HTML snapshot of a page (an archived copy): the page as fetched or captured, cleaned, with its
images and style sheets fetched and inlined as `data:` URLs.

Cleaning (lxml_html_clean, then a pass of our own): scripts, `<noscript>` fallbacks kept, event handlers (`on*`),
`javascript:` and other script URLs, forms and their controls, frames and iframes, objects and embeds, `<base>`,
`<meta>` (refresh among them), `<link>`, audio and video, comments and processing instructions are removed; links
point at the page's own site, absolute, never opening a window or sending a referrer.

Every resource is fetched through the outbound guard (`lev.net.guard.open_url`: the SSRF address rule on every
connection and redirect, the caller's fair share of outbound slots from `lev.net.share`), with these caps:

- the page's HTML: at most `MAX_SOURCE_BYTES` (5 MiB) is archived (a larger page is not);
- a resource: at most `MAX_RESOURCE_BYTES` (1 MiB) and `RESOURCE_SEC` (10 s); an image must be an image (its bytes
  say so) and a style sheet `text/css`; at most `MAX_RESOURCES` (200) fetched, `CONCURRENCY` (4) at once;
- the snapshot: at most `MAX_SNAPSHOT_BYTES` (10 MiB) with its inlined resources (one that arrives when it would
  pass it is left out), built within `BUILD_SEC` (60 s); fonts are never inlined.

What is left out is listed in `skipped` (at most 50, with the reason); the copy is readable without it.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import html
import re
import time
from dataclasses import dataclass, field
from typing import Any

import filetype
import httpx
import lxml.html
from lxml import etree
from lxml_html_clean import Cleaner

from lev.archive import css
from lev.core.charsets import text_codec
from lev.core.errors import ApiError
from lev.net.guard import USER_AGENT, guarded_client, open_url
from lev.plumbing.ports import Outbound

MAX_SOURCE_BYTES = 5 * 1024 * 1024
MAX_RESOURCE_BYTES = 1024 * 1024
MAX_SNAPSHOT_BYTES = 10 * 1024 * 1024
MAX_RESOURCES = 200
RESOURCE_SEC = 10.0
BUILD_SEC = 60.0
CONCURRENCY = 4
MAX_SKIPPED = 50
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp",
                         "image/x-icon", "image/vnd.microsoft.icon", "image/svg+xml"})

_CLEANER = Cleaner(scripts=True, javascript=True, comments=True, style=False, inline_style=False, links=False,
                   meta=True, page_structure=False, processing_instructions=True, embedded=True, frames=True,
                   forms=True, annoying_tags=True, remove_unknown_tags=False, safe_attrs_only=False,
                   add_nofollow=False)
_DROP = ("base", "link", "meta", "audio", "source", "video", "track", "portal", "template", "dialog", "set",
         "animate", "animatemotion", "animatetransform", "script", "noembed", "object", "embed", "iframe", "frame")
_URL_ATTRS = ("href", "src", "action", "formaction", "xlink:href", "{http://www.w3.org/1999/xlink}href",
              "background", "poster", "srcset", "imagesrcset", "ping", "cite", "longdesc", "lowsrc", "dynsrc",
              "data", "codebase", "manifest", "usemap")
_LAZY = ("data-src", "data-lazy-src", "data-original")
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")


@dataclass
class Snapshot:
    html: bytes
    resources: int = 0  # inlined
    skipped: list[dict[str, str]] = field(default_factory=list)


def decode(raw: bytes, charset: str | None) -> str:
    """The page's text: in the charset its server named, else UTF-8, else the one its `<meta>` names, else
    Windows-1252 (what browsers fall back to). A named charset counts only when it is a one-pass text encoding
    (`lev.core.charsets.text_codec`: punycode and the like would take quadratic time)."""
    head = _CHARSET.search(raw[:4096])
    named = (charset, "utf-8", head.group(1).decode("ascii", errors="replace") if head else None)
    for enc in dict.fromkeys(text_codec(e, "") for e in named if e):
        if enc:
            try:
                return raw.decode(enc)
            except UnicodeDecodeError:
                continue
    return raw.decode("cp1252", errors="replace")


class _Fetcher:
    """The snapshot's resources, each fetched once through the guard, within the caps, as `data:` URLs."""

    def __init__(self, outbound: Outbound, deadline: float) -> None:
        self.outbound = outbound
        self.deadline = deadline
        self.room = 0  # bytes the snapshot may still grow by; set once the cleaned page's size is known
        self.done: dict[str, str | None] = {}
        self.sheets: dict[str, str] = {}
        self.skipped: list[dict[str, str]] = []
        self.tried = 0
        self.gate = asyncio.Semaphore(CONCURRENCY)

    def skip(self, url: str, reason: str) -> None:
        if len(self.skipped) < MAX_SKIPPED:
            self.skipped.append({"url": url[:500], "reason": reason})

    async def get(self, client: httpx.AsyncClient, url: str, kind: str) -> bytes | None:
        """A resource's bytes, or None (noted in `skipped`) when the guard refuses it, it fails or breaks a cap."""
        self.tried += 1
        if self.tried > MAX_RESOURCES:
            self.skip(url, f"more than {MAX_RESOURCES} resources")
            return None
        if self.deadline - time.monotonic() <= 0:
            self.skip(url, f"the snapshot's {BUILD_SEC:g} s were up")
            return None
        try:
            async with self.gate, asyncio.timeout(min(RESOURCE_SEC, max(self.deadline - time.monotonic(), 0.01))):
                async with open_url(client, url) as resp:
                    ctype = resp.headers.get("content-type", "").split(";", 1)[0].strip().lower()
                    if kind == "css" and ctype != "text/css":
                        self.skip(url, f"not a style sheet ({ctype or 'no type'})")
                        return None
                    body = bytearray()
                    async for piece in resp.aiter_bytes():
                        body += piece
                        if len(body) > MAX_RESOURCE_BYTES:
                            self.skip(url, f"larger than {MAX_RESOURCE_BYTES // 1024} KiB")
                            return None
                    return bytes(body)
        except TimeoutError:
            self.skip(url, f"took longer than {RESOURCE_SEC:g} s (or the snapshot's {BUILD_SEC:g} s were up)")
        except ApiError as err:  # refused by the guard, unreachable, or an error answer
            self.skip(url, err.message or err.code)
        except httpx.HTTPError as err:
            self.skip(url, f"could not be read: {type(err).__name__}")
        return None

    async def image(self, client: httpx.AsyncClient, url: str) -> None:
        if url in self.done:
            return
        self.done[url] = None
        body = await self.get(client, url, "image")
        if body is None:
            return
        mime = filetype.guess_mime(body) or ("image/svg+xml" if _is_svg(body) else None)
        if mime not in IMAGE_TYPES:
            self.skip(url, "not an image")
            return
        data = f"data:{mime};base64,{base64.b64encode(body).decode('ascii')}"
        if len(data) > self.room:
            self.skip(url, f"the copy's size cap ({MAX_SNAPSHOT_BYTES:,} bytes)")
            return
        self.room -= len(data)
        self.done[url] = data

    async def sheet(self, client: httpx.AsyncClient, url: str, depth: int = 0) -> None:
        """A style sheet's text and, once, the sheets it imports (two levels deep at most)."""
        if url in self.sheets or depth > 2:
            return
        self.sheets[url] = ""
        body = await self.get(client, url, "css")
        if body is None:
            return
        text = body.decode("utf-8", errors="replace")
        if len(text) > self.room:
            self.skip(url, f"the copy's size cap ({MAX_SNAPSHOT_BYTES:,} bytes)")
            return
        self.room -= len(text)
        self.sheets[url] = text
        await asyncio.gather(*(self.sheet(client, u, depth + 1) for u in css.imports(text, url)))

    def sheet_text(self, url: str, seen: frozenset[str] = frozenset()) -> str | None:
        """A fetched sheet rewritten: its imports inlined, its images as `data:` URLs."""
        text = self.sheets.get(url)
        if not text or url in seen:
            return None
        return css.rewrite(text, url, lambda u: self.sheet_text(u, seen | {url}), self.done.get)


def _is_svg(body: bytes) -> bool:
    start = body[:1024].lstrip().lower()
    return start.startswith((b"<svg", b"<?xml")) and b"<svg" in body[:4096].lower()


def _clean(doc: Any, base: str) -> tuple[list[str], list[Any]]:
    """Clean the tree in place; the style sheets it linked (absolute URLs, in order) and their placeholders."""
    links = []
    for el in list(doc.iter("link")):
        url = css.absolute(base, el.get("href") or "")
        if "stylesheet" in (el.get("rel") or "").lower() and "alternate" not in (el.get("rel") or "").lower() \
                and url:
            holder = lxml.html.Element("lev-sheet", {"data-href": url})  # kept through the cleaner
            el.addprevious(holder)
            links.append(url)
    # lxml's cleaner reads style sheets and style attributes with patterns that take time quadratic in their
    # length (`url\([^)]*\)`, `/\*.*?\*/`, `expression\(.*?\)`: 20 s for 100 KB); their text is held out
    # while it cleans, then read by lev.archive.css, linear, whose rewrite keeps only images as data: URLs.
    held = [(el, el.text) for el in doc.iter("style")] + [(el, el.get("style")) for el in doc.iter()
                                                          if isinstance(el.tag, str) and el.get("style")]
    for el, _ in held:
        if el.tag == "style":
            el.text = ""
        else:
            el.set("style", "")
    _CLEANER(doc)
    for el, text in held:
        if el.getparent() is None and el.tag != "html":
            continue  # dropped by the cleaner
        if el.tag == "style":
            el.text = text
        else:
            el.set("style", text or "")
    for el in list(doc.iter(*_DROP)):
        el.drop_tree()
    for el in doc.iter(etree.Element):
        for name in list(el.attrib):
            low = name.lower()
            if low.startswith("on") or low in ("target", "srcdoc", "integrity", "nonce", "http-equiv") or \
                    (low in _URL_ATTRS and not (el.tag == "a" and low == "href")
                     and not (el.tag in ("img", "image") and low in ("src", "href", "xlink:href",
                                                                      "{http://www.w3.org/1999/xlink}href"))):
                del el.attrib[name]
    for a in doc.iter("a"):
        url = css.absolute(base, a.get("href") or "")
        if url:
            a.set("href", url)
            a.set("rel", "noopener noreferrer nofollow")
        elif "href" in a.attrib:
            del a.attrib["href"]
    return links, list(doc.iter("lev-sheet"))


def _images(doc: Any, base: str) -> list[tuple[Any, str, str | None]]:
    """Every image element, its attribute and the image's absolute URL (None for one it keeps as it is)."""
    found: list[tuple[Any, str, str | None]] = []
    for el in doc.iter("img", "image"):
        for attr in ("src", "href", "{http://www.w3.org/1999/xlink}href"):
            raw = (el.get(attr) or "").strip()
            if attr == "src" and (not raw or raw.startswith("data:image/gif")):  # a lazy loader's placeholder
                raw = next((el.get(a) for a in _LAZY if el.get(a)), raw) or ""
            if not raw:
                continue
            if raw.lower().startswith("data:image/") and '"' not in raw:
                found.append((el, attr, None))
            else:
                found.append((el, attr, css.absolute(base, raw) or ""))
            break
        for a in ("srcset", "sizes", *_LAZY):
            el.attrib.pop(a, None)
    return found


def _banner(doc: Any, url: str, saved: dt.datetime, kept: int, left: int) -> None:
    body = doc.find("body")
    if body is None:
        body = etree.SubElement(doc, "body")
    note = lxml.html.fragment_fromstring(
        '<div data-lev-archive="" role="note" style="font:14px/1.4 system-ui,sans-serif;background:#fff8e1;'
        'color:#1d2230;border-bottom:1px solid #e0c97f;padding:8px 12px;margin:0 0 8px">Archived copy of '
        f'<a href="{html.escape(url)}" rel="noopener noreferrer nofollow">{html.escape(url[:200])}</a>, saved '
        f"{saved:%Y-%m-%d %H:%M} UTC by Lev. Scripts, forms and frames were removed; {kept} images and styles "
        f"were kept{f', {left} left out' if left else ''}.</div>")
    body.insert(0, note)


async def build(outbound: Outbound, raw: bytes, url: str, *, charset: str | None = None,
                saved: dt.datetime | None = None) -> Snapshot:
    """The snapshot of the page `raw` (served at `url`): cleaned, its resources inlined within the caps."""
    saved = saved or dt.datetime.now(dt.UTC)
    text = _XML_DECL.sub("", decode(raw[:MAX_SOURCE_BYTES], charset))
    doc = lxml.html.document_fromstring(text or "<html></html>")
    base = url
    links, holders = _clean(doc, base)
    images = _images(doc, base)
    styled = [el for el in doc.iter(etree.Element) if el.get("style")]
    blocks = list(doc.iter("style"))
    fetcher = _Fetcher(outbound, time.monotonic() + BUILD_SEC)
    fetcher.room = MAX_SNAPSHOT_BYTES - len(lxml.html.tostring(doc)) - 2048
    headers = {"User-Agent": USER_AGENT, "Accept": "image/*,text/css;q=0.9,*/*;q=0.1"}
    async with guarded_client(outbound, httpx.Timeout(RESOURCE_SEC, connect=5.0), headers,
                              connections=CONCURRENCY) as client:
        await asyncio.gather(*(fetcher.sheet(client, u) for u in dict.fromkeys(links)))
        wanted = [u for _, _, u in images if u]
        for sheet_url, sheet_text in fetcher.sheets.items():
            wanted += css.references(sheet_text, sheet_url)
        for el in [*styled, *blocks]:
            wanted += css.references((el.get("style") if el.tag != "style" else el.text) or "", base)
        # fetched CONCURRENCY at a time; the size cap keeps them as they arrive
        await asyncio.gather(*(fetcher.image(client, u) for u in dict.fromkeys(wanted)))
    for el, attr, u in images:
        if u is not None:
            data = fetcher.done.get(u)
            if data:
                el.set(attr, data)
            else:
                del el.attrib[attr]
                el.set("data-lev-missing", "")
    for el in styled:
        el.set("style", css.rewrite(el.get("style") or "", base, lambda _u: None, fetcher.done.get))
    for el in blocks:
        el.text = css.rewrite(el.text or "", base, lambda _u: None, fetcher.done.get)
    for holder in holders:
        sheet = fetcher.sheet_text(holder.get("data-href"))
        if sheet:
            style = lxml.html.Element("style")
            style.text = sheet
            holder.addprevious(style)
        holder.drop_tree()
    head = doc.find("head")
    if head is None:
        head = lxml.html.Element("head")
        doc.insert(0, head)
    for name, value in (("referrer", "no-referrer"), (None, "utf-8")):
        meta = lxml.html.Element("meta", {"name": name, "content": value} if name else {"charset": value})
        head.insert(0, meta)
    kept = sum(1 for v in fetcher.done.values() if v) + sum(1 for v in fetcher.sheets.values() if v)
    _banner(doc, url, saved, kept, len(fetcher.skipped))
    out = lxml.html.tostring(doc, encoding="unicode", doctype="<!DOCTYPE html>").encode("utf-8")
    return Snapshot(out, kept, fetcher.skipped)
