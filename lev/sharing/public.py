"""A published folder as the public sees it: its page's entries and its Atom feed (RFC 4287). Titles, links, saved
dates and a short excerpt only: never an item's full text, never a note beyond its excerpt."""

from __future__ import annotations

import re
import time
import uuid
import xml.etree.ElementTree as ET
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lev.core import context
from lev.core.xmltext import xml_text
from lev.plumbing.deps import Deps
from lev.store import publications as publication_store
from lev.store.locations import title_prefix

MAX_ENTRIES = 100
CACHE_SEC = 5.0  # how long a process serves a published folder's entries before reading them again
EXCERPT_CHARS = 280
ATOM = "http://www.w3.org/2005/Atom"
_SLUG = re.compile(r"[A-Za-z0-9_-]{22,64}")


@dataclass(frozen=True)
class Entry:
    id: str
    title: str
    link: str | None
    kind: str
    saved_at: datetime
    filed_at: datetime
    excerpt: str


@dataclass(frozen=True)
class Published:
    slug: str
    name: str
    page_url: str
    feed_url: str
    entries: list[Entry]

    @property
    def updated(self) -> datetime | None:
        return max((e.filed_at for e in self.entries), default=None)


def _untitled(text: str | None, title: str | None) -> str:
    """The text after its opening title (the page shows the title already)."""
    return (text or "")[title_prefix(text or "", title):]


def excerpt(text: str | None, limit: int = EXCERPT_CHARS) -> str:
    """The first words of a text, whitespace folded, at most `limit` characters (an ellipsis when cut)."""
    flat = " ".join((text or "").split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,.;:") + "…"


class _Recent:
    """A process's recently read entries of published folders (at most `size`, each for `seconds`): a crowd of
    visitors costs one read of the entries every few seconds. The publication itself is read on every request, so
    a page turned off answers 404 at once."""

    def __init__(self, seconds: float = CACHE_SEC, size: int = 256) -> None:
        self.seconds, self.size = seconds, size
        self._held: OrderedDict[uuid.UUID, tuple[float, list[Entry]]] = OrderedDict()

    def get(self, folder_id: uuid.UUID) -> list[Entry] | None:
        held = self._held.get(folder_id)
        return held[1] if held and time.monotonic() - held[0] < self.seconds else None

    def put(self, folder_id: uuid.UUID, entries: list[Entry]) -> None:
        self._held[folder_id] = (time.monotonic(), entries)
        self._held.move_to_end(folder_id)
        while len(self._held) > self.size:
            self._held.popitem(last=False)


_recent = _Recent()


async def published(deps: Deps, slug: str) -> Published | None:
    """The folder published under `slug` with its newest entries (read at most every few seconds), or None (never
    published, or turned off)."""
    if not _SLUG.fullmatch(slug):
        return None
    async with deps.db.read_session() as s:
        folder = await publication_store.by_slug(s, slug)
        if folder is None:
            return None
        entries = _recent.get(folder["folder_id"])
        if entries is None:
            rows = await publication_store.shown_items(s, folder["folder_id"], MAX_ENTRIES)
            entries = [Entry(id=str(r["id"]), title=r["title"] or r["url"] or "Untitled", link=_http(r["url"]),
                             kind=r["kind"], saved_at=r["saved_at"], filed_at=r["filed_at"], excerpt=excerpt(
                                 _untitled(r["text"], r["title"])))
                       for r in rows]
            _recent.put(folder["folder_id"], entries)
    page = f"{context.base_url()}/p/{slug}"
    return Published(slug, folder["name"], page, f"{page}/feed.atom", entries)


def _stamp(at: datetime) -> str:
    return at.isoformat(timespec="seconds")


def atom(pub: Published, generated_at: datetime) -> bytes:
    """The feed: one entry per item, newest first, each with its link (the page's anchor for items without one)."""
    ET.register_namespace("", ATOM)

    def sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: Any) -> ET.Element:
        el = ET.SubElement(parent, f"{{{ATOM}}}{tag}", {k: xml_text(str(v)) for k, v in attrs.items()})
        if text is not None:
            el.text = xml_text(text)
        return el

    feed = ET.Element(f"{{{ATOM}}}feed")
    sub(feed, "id", pub.page_url)
    sub(feed, "title", pub.name)
    sub(feed, "updated", _stamp(pub.updated or generated_at))
    sub(feed, "link", rel="self", type="application/atom+xml", href=pub.feed_url)
    sub(feed, "link", rel="alternate", type="text/html", href=pub.page_url)
    author = sub(feed, "author")
    sub(author, "name", pub.name)
    sub(feed, "generator", "Lev")
    for e in pub.entries:
        entry = sub(feed, "entry")
        sub(entry, "id", f"urn:uuid:{e.id}")
        sub(entry, "title", e.title)
        sub(entry, "link", rel="alternate", href=e.link or f"{pub.page_url}#item-{e.id}")
        sub(entry, "published", _stamp(e.saved_at))
        sub(entry, "updated", _stamp(e.filed_at))
        if e.excerpt:
            sub(entry, "summary", e.excerpt, type="text")
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="utf-8", xml_declaration=False)


def _http(url: str | None) -> str | None:
    """A link the public may follow: http and https only."""
    return url if url and url.lower().startswith(("http://", "https://")) else None
