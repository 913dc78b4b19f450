"""The web pages' words: an item's kind, site, dates, locations and metadata as people say them (Jinja filters
the templates use; the JSON APIs keep their own names)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from markupsafe import Markup, escape

from lev.store.locations import title_prefix

KIND_WORDS = {"url": "Web page", "page": "Web page", "text": "Note", "pdf": "PDF", "image": "Image",
              "audio": "Audio", "video": "Video", "youtube": "YouTube video", "document": "Document",
              "presentation": "Slides", "spreadsheet": "Spreadsheet", "ebook": "E-book", "markdown": "Markdown",
              "html": "HTML file", "email": "E-mail"}
STATUS_WORDS = {"processing": "Processing", "ready": "Ready", "failed": "Failed"}
# Metadata keys people read on an item page; the rest stay out of sight (the REST item carries them all).
META_WORDS = {"url": "Link", "final_url": "Opened at", "site_name": "Site", "author": "Author", "authors": "Authors",
              "published": "Published", "date": "Date", "language": "Language", "filename": "File",
              "mime": "File type", "size_bytes": "Size", "pages": "Pages", "page_count": "Pages",
              "duration_sec": "Length", "channel": "Channel", "description": "Description", "sitename": "Site",
              "hostname": "Site", "title": "Title", "slides": "Slides", "sheets": "Sheets"}
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WORD = re.compile(r"\w{2,}", re.UNICODE)
_OPERATOR = re.compile(r'\b(?:site|kind|after|before|folder|tag):(?:"[^"]*"|\S+)', re.IGNORECASE)


def kind_word(kind: str | None) -> str:
    return KIND_WORDS.get(kind or "", (kind or "item").replace("_", " ").capitalize())


def site(url: str | None) -> str:
    if not url:
        return ""
    host = urlsplit(url).hostname or ""
    return host[4:] if host.startswith("www.") else host


def _parse(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def day(value: Any) -> str:
    """`2026-03-04T10:00:00Z` → `4 Mar 2026`."""
    when = _parse(value)
    return f"{when.day} {MONTHS[when.month - 1]} {when.year}" if when else str(value or "")


def moment(value: Any) -> str:
    """`2026-03-04T10:05:09Z` → `4 Mar 2026, 10:05` (UTC, as the pages say)."""
    when = _parse(value)
    return f"{day(when)}, {when:%H:%M}" if when else str(value or "")


def clock(seconds: Any) -> str:
    total = int(float(seconds or 0))
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def where(location: dict[str, Any] | None, start_sec: Any = None) -> str:
    """A hit's place in its item: `p. 3`, `pp. 3–4`, `Slide 4`, `Sheet Budget, rows 2–9`, `2:14`."""
    loc = location or {}
    if loc.get("page"):
        end = loc.get("page_end")
        return f"pp. {loc['page']}–{end}" if end and end != loc["page"] else f"p. {loc['page']}"
    if loc.get("slide"):
        return f"Slide {loc['slide']}"
    if loc.get("sheet"):
        start, end = loc.get("row_start"), loc.get("row_end")
        rows = (f", rows {start}–{end}" if end and end != start else f", row {start}") if start else ""
        return f"Sheet {loc['sheet']}{rows}"
    sec = start_sec if isinstance(start_sec, (int, float)) else loc.get("start_sec")
    return clock(sec) if isinstance(sec, (int, float)) else ""


def size(value: Any) -> str:
    n = float(value or 0)
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(value)


_OOXML = "application/vnd.openxmlformats-officedocument."
MIME_WORDS = {"application/pdf": "PDF document", f"{_OOXML}wordprocessingml.document": "Word document",
              f"{_OOXML}presentationml.presentation": "PowerPoint presentation",
              f"{_OOXML}spreadsheetml.sheet": "Excel workbook", "text/csv": "CSV table",
              "application/epub+zip": "EPUB book", "text/markdown": "Markdown text", "text/html": "Saved web page",
              "message/rfc822": "E-mail message", "text/plain": "Plain text", "image/png": "PNG image",
              "image/jpeg": "JPEG image", "image/webp": "WebP image", "image/gif": "GIF image",
              "audio/mpeg": "MP3 audio", "audio/mp4": "M4A audio", "audio/wav": "WAV audio", "audio/x-wav": "WAV audio",
              "audio/ogg": "Ogg audio", "video/mp4": "MP4 video", "video/webm": "WebM video"}


def meta_rows(metadata: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The metadata people read, named in words, each value in its own form (sizes, lengths, dates)."""
    rows: list[tuple[str, str]] = []
    seen: set[str] = set()
    for key, value in (metadata or {}).items():
        name = META_WORDS.get(key)
        if not name or name in seen or value in (None, "", [], {}):
            continue
        if key == "size_bytes":
            shown = size(value)
        elif key == "duration_sec":
            shown = clock(value)
        elif key in ("published", "date"):
            shown = day(value)
        elif key == "mime":
            shown = MIME_WORDS.get(str(value).split(";")[0].strip().lower(), str(value))
        elif isinstance(value, list):
            shown = ", ".join(str(v) for v in value)
        else:
            shown = str(value)
        seen.add(name)
        rows.append((name, shown[:500]))
    return rows


def query_words(query: str | None) -> list[str]:
    """The words of a search to mark in its hits (operators such as `site:` left out)."""
    return sorted({w.lower() for w in _WORD.findall(_OPERATOR.sub(" ", query or ""))}, key=len, reverse=True)


def marked(text: str | None, query: str | None) -> Markup:
    """`text` escaped, with the search's words (and words starting with them) in <mark>."""
    words = query_words(query)
    body = text or ""
    if not words:
        return Markup(escape(body))
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\w*", re.IGNORECASE)
    out, last = [], 0
    for m in pattern.finditer(body):
        out.append(str(escape(body[last:m.start()])))
        out.append(f"<mark>{escape(m.group(0))}</mark>")
        last = m.end()
    out.append(str(escape(body[last:])))
    return Markup("".join(out))


def excerpt(text: str | None, query: str | None, width: int = 300) -> str:
    """At most `width` characters of `text`, centred on the first word of the search it holds; its paragraphs
    stay apart (one line each: a heading does not run into the sentence after it)."""
    body = "\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n|\n", text or "") if p.strip())
    if len(body) <= width:
        return body
    words = query_words(query)
    first = min((i for i in (body.lower().find(w) for w in words) if i >= 0), default=0)
    start = max(0, first - width // 3)
    if start:
        start = body.find(" ", start) + 1 or start
    cut = body[start:start + width]
    return ("…" if start else "") + cut.rsplit(" ", 1)[0] + "…"


def hit_text(hit: dict[str, Any]) -> str:
    """A hit's passage as the page shows it: without the item's title it opens with (the hit's heading says it)."""
    text = str(hit.get("text") or "")
    return text if hit.get("highlight_id") else text[title_prefix(text, hit.get("title")):]


def hit_heading(hit: dict[str, Any]) -> str | None:
    """A hit's heading unless it says the item's title or the sheet (`Sheet Budget`) again."""
    location = hit.get("location") or {}
    heading = location.get("heading")

    def flat(value: Any) -> str:
        return " ".join(str(value or "").split()).casefold()

    return None if heading and flat(heading) in (flat(hit.get("title")), flat(location.get("sheet"))) else heading


def zip_none(values: Any) -> list[tuple[Any, None]]:
    """Chips without links: [(text, None), ...]."""
    return [(v, None) for v in values]


def untitled(paragraphs: list[Any], title: str | None) -> list[Any]:
    """The reader's paragraphs without a first one that only says the title (the page's heading says it)."""
    if not paragraphs or not title:
        return list(paragraphs)
    first = paragraphs[0]
    words = " ".join("".join(r.text for r in first.runs).split()).casefold()
    marked = any(r.highlight_ids for r in first.runs)
    if words != " ".join(title.split()).casefold() or marked:
        return list(paragraphs)
    rest = [replace(p) for p in paragraphs[1:]]
    if rest and first.page and not rest[0].page:
        rest[0].page = first.page  # the page's mark stays, before the paragraph after the title
    if rest and first.label and not rest[0].label:
        rest[0].label = first.label  # so does a slide's
    return rest


FILTERS = {"kind_word": kind_word, "site": site, "day": day, "moment": moment, "clock": clock, "where": where,
           "size": size, "meta_rows": meta_rows, "marked": marked, "excerpt": excerpt,
           "zip_none": zip_none, "untitled": untitled, "hit_text": hit_text, "hit_heading": hit_heading}
