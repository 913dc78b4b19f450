"""Reading feeds: fetching one through the SSRF guard with a conditional GET (ETag / Last-Modified), telling a feed
(RSS 0.9x-2.0, RSS 1.0, Atom with feedparser; JSON Feed 1.0 / 1.1 by hand) from anything else, finding the feed a
site's page names (`<link rel="alternate">`), and its entries newest first.

A follow answers in seconds whatever the feed's size: a document larger than `GLANCE_BYTES` is only glanced at in
the request (its first entries tell a feed, its title and link); its entries are read whole in the background.
feedparser takes about 0.7 ms an entry on a quiet machine (ten times that on a loaded one), a 10 MB feed holds some
70,000: a reading has `READ_DEADLINE_SEC` in its child."""

from __future__ import annotations

import asyncio
import calendar
import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin
from xml.parsers import expat

import feedparser
import httpx

from lev.core import weburl
from lev.core.errors import ApiError, not_a_feed
from lev.feeds import authors  # noqa: F401  (feedparser's author pattern bounded, on import)
from lev.feeds.xmlguard import declares_entities
from lev.imports.importfile import dedupe_key
from lev.net.guard import AddressRefused, open_url, shared_client
from lev.plumbing import offload
from lev.plumbing.ports import Outbound

MAX_FEED_BYTES = 10 * 1024 * 1024
GLANCE_BYTES = 64 * 1024  # a larger feed is glanced at in a follow: at most this much of it is read then,
GLANCE_ENTRIES = 20  # and at most this many of its entries
READ_DEADLINE_SEC = 240.0  # a whole reading in its child (a glance takes well under a second)
HEAD_BYTES = 16 * 1024  # what tells a document without entries in its first GLANCE_BYTES (its root element)
CONNECTIONS = 32  # above the schedule's checks at once: a check never queues in the pool (each wait scans it)
READ_TIMEOUT_SEC = 15.0
TOTAL_TIMEOUT_SEC = 30.0
FEED_TYPES = ("application/rss+xml", "application/atom+xml", "application/feed+json", "application/json",
              "application/rdf+xml", "application/xml", "text/xml")
MAX_CONTENT_CHARS = 1_000_000  # an entry's own text kept for its item when its page has none
ACCEPT = ("application/rss+xml, application/atom+xml, application/feed+json, application/rdf+xml, "
          "application/xml;q=0.9, text/xml;q=0.9, text/html;q=0.5, */*;q=0.1")



@dataclass
class Entry:
    """One entry: its guid (the link when it has none), the URL to ingest (an audio or video enclosure before
    the page link), title and date; `content`, the entry's own text as HTML (its content, else its summary), stored
    when its page has no readable text."""

    guid: str
    url: str | None
    title: str | None
    published: datetime | None
    content: str | None = None
    guid_key: bytes = b""  # what makes two entries the same for the user's feeds: the guid's and the URL's hashes
    url_key: bytes | None = None

    def __post_init__(self) -> None:
        self.guid_key = _key(self.guid)
        self.url_key = _key(dedupe_key(self.url)) if self.url else None


def _key(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


@dataclass
class Feed:
    title: str | None
    site_url: str | None
    entries: list[Entry] = field(default_factory=list)


@dataclass
class Fetched:
    """A fetch's answer: 200 with its body, or 304 (nothing new since the validators sent)."""

    status: int
    url: str
    body: bytes = b""
    content_type: str = ""
    etag: str | None = None
    last_modified: str | None = None

    @property
    def sha256(self) -> bytes:
        """The body's hash: the same document answered again is recognised without being parsed."""
        return hashlib.sha256(self.body).digest()


async def _read(resp: httpx.Response) -> bytes:
    declared = resp.headers.get("content-length", "")
    too_big = f"the feed is larger than {MAX_FEED_BYTES // (1 << 20)} MB"
    if declared.isdigit() and int(declared) > MAX_FEED_BYTES:
        raise not_a_feed(too_big)
    buf = bytearray()
    async for piece in resp.aiter_bytes():
        buf += piece
        if len(buf) > MAX_FEED_BYTES:
            raise not_a_feed(too_big)
    return bytes(buf)


async def fetch(outbound: Outbound, url: str, etag: str | None = None, last_modified: str | None = None) -> Fetched:
    """GET `url` through the guard (at most 5 redirects, 10 MB, 30 s) with the validators of the last fetch.
    Raises a descriptive ApiError (the guard's `ingest_failed`, or `not_a_feed` past the size)."""
    headers = {"Accept": ACCEPT}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    client = shared_client(outbound, READ_TIMEOUT_SEC, connections=CONNECTIONS)
    try:
        async with asyncio.timeout(TOTAL_TIMEOUT_SEC):
            async with open_url(client, url, headers=headers, not_modified=bool(etag or last_modified)) as resp:
                final = str(resp.url.copy_with(fragment=None))
                if resp.status_code == 304:
                    return Fetched(304, final, etag=etag, last_modified=last_modified)
                body = await _read(resp)
                return Fetched(200, final, body, resp.headers.get("content-type", ""),
                               resp.headers.get("etag"), resp.headers.get("last-modified"))
    except TimeoutError:
        raise not_a_feed(f"the feed took longer than {TOTAL_TIMEOUT_SEC:g} s to fetch") from None


def _when(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    try:  # feedparser's UTC struct_time
        return datetime.fromtimestamp(calendar.timegm(value), UTC)
    except (TypeError, ValueError, OverflowError):
        return None


def _http(url: Any, base: str) -> str | None:
    if not isinstance(url, str) or not url.strip():
        return None
    try:
        full = urljoin(base, url.strip())
    except ValueError:
        return None
    return full if weburl.is_http_url(full) else None


def _text(value: Any) -> str | None:
    return " ".join(value.replace("\x00", " ").split())[:500] or None if isinstance(value, str) else None


def _html(value: Any, html: bool = True) -> str | None:
    """An entry's text as HTML (plain text escaped into a paragraph), at most MAX_CONTENT_CHARS, or None."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.replace("\x00", " ")[:MAX_CONTENT_CHARS]
    return value if html else f"<p>{escape(value)}</p>"


def _xml_content(item: Any) -> str | None:
    """feedparser's content of an entry (Atom content, RSS content:encoded; sanitised by feedparser), else its
    summary (RSS description)."""
    for part in item.get("content") or []:
        value = _html(part.get("value"), "html" in str(part.get("type", "text/html")))
        if value is not None:
            return value
    return _html(item.get("summary"), "html" in str((item.get("summary_detail") or {}).get("type", "text/html")))


def _newest_first(entries: list[Entry]) -> list[Entry]:
    """By date, newest first; entries without a date keep the feed's order (feeds list the newest first)."""
    if all(e.published is None for e in entries):
        return entries
    floor = datetime.min.replace(tzinfo=UTC)
    return sorted(entries, key=lambda e: e.published or floor, reverse=True)


def _json_feed(body: bytes, base: str) -> Feed | None:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or "jsonfeed.org/version/" not in str(doc.get("version", "")):
        return None
    entries = []
    for item in doc.get("items") or []:
        if not isinstance(item, dict):
            continue
        media = next((_http(a.get("url"), base) for a in item.get("attachments") or [] if isinstance(a, dict)
                      and str(a.get("mime_type", "")).startswith(("audio/", "video/"))), None)
        url = media or _http(item.get("url") or item.get("external_url"), base)
        guid = str(item.get("id") or "") or url
        if guid:
            entries.append(Entry(guid[:2000], url, _text(item.get("title")),
                                 _when(item.get("date_published") or item.get("date_modified")),
                                 _html(item.get("content_html")) or _html(item.get("content_text"), html=False)
                                 or _html(item.get("summary"), html=False)))
    return Feed(_text(doc.get("title")), _http(doc.get("home_page_url"), base), _newest_first(entries))


def _xml_feed(body: bytes, base: str, content_type: str) -> Feed | None:
    if declares_entities(body) is not None:
        return None
    parsed = feedparser.parse(body, response_headers={"content-location": base, "content-type": content_type})
    if not parsed.get("version"):
        return None
    if parsed.get("bozo") and not any(e.get("link") or e.get("id") for e in parsed.entries):
        return None  # broken XML that yields no usable entry is not a feed (a broken one that does is read)
    entries = []
    for item in parsed.entries:
        media = next((_http(e.get("href"), base) for e in item.get("enclosures", [])
                      if str(e.get("type", "")).startswith(("audio/", "video/"))), None)
        url = media or _http(item.get("link"), base)
        guid = str(item.get("id") or "") or url
        if guid:
            entries.append(Entry(guid[:2000], url, _text(item.get("title")),
                                 _when(item.get("published_parsed") or item.get("updated_parsed")),
                                 _xml_content(item)))
    return Feed(_text(parsed.feed.get("title")), _http(parsed.feed.get("link"), base), _newest_first(entries))


def parse(body: bytes, content_type: str, url: str) -> Feed | None:
    """The feed in `body`, or None when it is not RSS, Atom or JSON Feed."""
    head = body.lstrip()[:1]
    if head in (b"{", b"["):
        return _json_feed(body, url)
    return _xml_feed(body, url, content_type)


_ENTRY_END = re.compile(rb"</(?:[a-z0-9]+:)?(?:item|entry)\s*>", re.IGNORECASE)


def _first_part(body: bytes) -> bytes:
    """The document's beginning, cut after its GLANCE_ENTRIES-th entry (or at GLANCE_BYTES, after the last whole
    entry there): the reader takes the unclosed rest as broken XML, which feeds may be."""
    part = body[:GLANCE_BYTES]
    cut = 0
    for n, end in enumerate(_ENTRY_END.finditer(part), 1):
        cut = end.end()
        if n == GLANCE_ENTRIES:
            break
    return part[:cut] if cut else part


def glance(body: bytes, content_type: str, url: str) -> Feed | None:
    """Whether a large document is a feed, from its beginning: its title and link, entries left unread (None: not
    a feed). A JSON Feed is decoded whole (fast) but its items are not read; an XML one by its first part (a whole
    document with an entity declaration anywhere is refused, as `parse` refuses it)."""
    head = body.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(doc, dict) or "jsonfeed.org/version/" not in str(doc.get("version", "")):
            return None
        return Feed(_text(doc.get("title")), _http(doc.get("home_page_url"), url))
    if declares_entities(body) is not None:
        return None
    part = _first_part(body)
    if _ENTRY_END.search(part) is None:  # no entry in its first GLANCE_BYTES: its root element says what it is
        parsed = feedparser.parse(body[:HEAD_BYTES], response_headers={"content-location": url,
                                                                       "content-type": content_type})
        if not parsed.get("version"):
            return None
        return Feed(_text(parsed.feed.get("title")), _http(parsed.feed.get("link"), url))
    feed = _xml_feed(part, url, content_type)
    if feed is not None:
        feed.entries = []
    return feed


class _Alternates(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ("link", "a"):
            return
        a = {k.lower(): (v or "") for k, v in attrs}
        rels = a.get("rel", "").lower().split()
        kind = a.get("type", "").split(";")[0].strip().lower()
        if "alternate" in rels and kind in FEED_TYPES and a.get("href"):
            self.found.append(a["href"])


def alternates(body: bytes, base: str) -> list[str]:
    """The feed URLs a page names in `<link rel="alternate" type="application/rss+xml">` (and Atom, JSON Feed)."""
    finder = _Alternates()
    try:
        finder.feed(body[:2_000_000].decode("utf-8", errors="replace"))
    except Exception:  # a page too broken to read names no feed
        return []
    return [u for u in (_http(h, base) for h in finder.found) if u]


def looks_like_html(fetched: Fetched) -> bool:
    kind = fetched.content_type.split(";")[0].strip().lower()
    return kind in ("text/html", "application/xhtml+xml") or fetched.body.lstrip()[:15].lower().startswith(
        (b"<!doctype html", b"<html"))


def why_not(fetched: Fetched) -> str:
    """Why a document that is not a feed is not one, in words."""
    if looks_like_html(fetched):
        return ("this page is not a feed and names none (no <link rel=\"alternate\"> to RSS, Atom or JSON "
                "Feed); paste the feed's own URL")
    line = declares_entities(fetched.body)
    if line is not None:
        return f"this document declares XML entities (line {line}); feeds with entity declarations are not read"
    if len(fetched.body) > GLANCE_BYTES:  # a large document: expat says where it breaks, in one pass
        reader = expat.ParserCreate()
        try:
            reader.Parse(fetched.body, True)
        except expat.ExpatError as exc:
            return f"this document is not an RSS, Atom or JSON Feed (XML error at line {exc.lineno}: " \
                   f"{expat.errors.messages[exc.code]})"[:500]
        return "this document is not an RSS, Atom or JSON Feed"
    parsed = feedparser.parse(fetched.body)
    error = parsed.get("bozo_exception")
    where = getattr(error, "getLineNumber", lambda: None)() if error is not None else None
    detail = f" (XML error{f' at line {where}' if where else ''}: {error})" if error is not None else ""
    return f"this document is not an RSS, Atom or JSON Feed{detail}"[:500]


@dataclass
class Reading:
    """What a fetched document is: a feed, or not one (`why_not`, in words, and the feeds a page names). A feed
    only glanced at (`partial`) has no entries read yet."""

    feed: Feed | None
    why_not: str = ""
    named: list[str] = field(default_factory=list)
    partial: bool = False


def examine(fetched: Fetched, whole: bool = True) -> Reading:
    """What `fetched` is; a document larger than GLANCE_BYTES only glanced at unless `whole`."""
    partial = not whole and len(fetched.body) > GLANCE_BYTES
    feed = (glance if partial else parse)(fetched.body, fetched.content_type, fetched.url)
    if feed is not None:
        return Reading(feed, partial=partial)
    return Reading(None, why_not(fetched), alternates(fetched.body, fetched.url) if looks_like_html(fetched) else [])


async def read(fetched: Fetched, whole: bool = True) -> Reading:
    """`examine` in a child process (feedparser and the HTML parser hold the GIL for seconds on a large document);
    a document that kills its reader, or outlasts its deadline, is not a feed."""
    try:
        return await offload.run(examine, fetched, whole, size=len(fetched.body), deadline=READ_DEADLINE_SEC)
    except offload.OffloadFailed:
        return Reading(None, "the document could not be read (its reader stopped)")


async def discover(outbound: Outbound, url: str) -> tuple[Fetched, Reading]:
    """The feed at `url`, or the one its page names: (its fetch, its reading: whole, or `partial` for a large one
    whose entries are read later). 400 not_a_feed saying why not, or address_refused (naming the setting that
    allows it) for an address the guard does not reach."""
    try:
        fetched = await fetch(outbound, url)
    except AddressRefused as exc:
        raise exc.refused_as("The feed's address") from None
    except ApiError as exc:
        raise not_a_feed(f"The feed cannot be fetched: {exc.message or exc.code}.") from None
    found = await read(fetched, whole=False)
    if found.feed is not None:
        return fetched, found
    if not found.named:
        raise not_a_feed(f"Not a feed: {found.why_not}.")
    named = found.named[0]
    try:
        linked = await fetch(outbound, named)
    except AddressRefused as exc:
        raise exc.refused_as(f"The page names the feed {named}, but its address") from None
    except ApiError as exc:
        raise not_a_feed(f"The page names the feed {named}, but it cannot be fetched: "
                         f"{exc.message or exc.code}.") from None
    reading = await read(linked, whole=False)
    feed = reading.feed
    if feed is None:
        raise not_a_feed(f"The page names the feed {named}, but {reading.why_not}.")
    if feed.site_url is None:
        feed.site_url = fetched.url
    return linked, reading
