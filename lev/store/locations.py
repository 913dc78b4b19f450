"""Where a passage sits in its item: the stored text's one form (`normalize_text`), the outline kept beside it
(section headings and PDF page starts, as character offsets into that text) and a chunk's location read from them.

A content's `text` (or, for a recording, its `transcript`) is stored normalised (`normalize_text`), and its chunks
are cut from that very string: `text[char_start:char_end]` of a chunk is the chunk's text. Pure functions: the
ingest path, the jobs and migration 0015's backfill all use them.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any

MAX_RUN = 16  # one character repeated more than this is not prose: the run is cut to this length before chunking
_RUNS = re.compile(rf"(\S)\1{{{MAX_RUN},}}")
_SPACES = re.compile(r"[ \t\f\v\u00a0\u2000-\u200b\u202f\u205f\u3000]+")
_BLANK_LINES = re.compile(r"\n{3,}")
_ATX = re.compile(r"^(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
HEADING_MAX_CHARS = 300
MAX_HEADINGS = 2_000  # an outline keeps the first ones: a text of a million "# a" lines made one of 3.7 MB
PATH_SEPARATOR = " > "  # between the parts of a heading path (`Chapter 2 > Costs`)


def normalize_whitespace(text: str) -> str:
    """Collapse runs of spaces, trim lines and keep at most one blank line between paragraphs (idempotent: the
    stored text is this form, and normalising it again changes nothing)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _SPACES.sub(" ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", text).strip()


def normalize_text(text: str) -> str:
    """The stored form of a text, the string its chunks are cut from: `normalize_whitespace`, then every run of one
    character longer than MAX_RUN cut to MAX_RUN (idempotent too)."""
    return _RUNS.sub(lambda m: m.group(1) * MAX_RUN, normalize_whitespace(text))


@dataclass(frozen=True)
class Outline:
    """A text's structure, each part sorted by offset into the normalised text: headings `(offset, heading)` (a
    heading path, `Part > Chapter`, for the documents Lev reads itself), PDF page starts `(offset, page number)`, a
    presentation's slide starts `(offset, slide number)`, a spreadsheet's sheet starts `(offset, sheet name)` and
    row starts `(offset, row number)`. `structured`: the outline is the document's own (its headings are all
    there are; none are looked for in the text)."""

    headings: tuple[tuple[int, str], ...] = ()
    pages: tuple[tuple[int, int], ...] = ()
    slides: tuple[tuple[int, int], ...] = ()
    sheets: tuple[tuple[int, str], ...] = ()
    rows: tuple[tuple[int, int], ...] = ()
    structured: bool = False

    def to_json(self) -> dict[str, Any] | None:
        if not (self.headings or self.pages or self.slides or self.sheets or self.rows or self.structured):
            return None
        value: dict[str, Any] = {"headings": [list(h) for h in self.headings], "pages": [list(p) for p in self.pages]}
        for name in ("slides", "sheets", "rows"):
            if getattr(self, name):
                value[name] = [list(x) for x in getattr(self, name)]
        if self.structured:
            value["structured"] = True
        return value

    @classmethod
    def from_json(cls, value: Any) -> Outline:
        if not isinstance(value, dict):
            return cls()
        return cls(tuple((int(o), str(h)) for o, h in value.get("headings") or ()),
                   tuple((int(o), int(n)) for o, n in value.get("pages") or ()),
                   tuple((int(o), int(n)) for o, n in value.get("slides") or ()),
                   tuple((int(o), str(n)) for o, n in value.get("sheets") or ()),
                   tuple((int(o), int(n)) for o, n in value.get("rows") or ()),
                   bool(value.get("structured")))

    def with_headings(self, headings: Iterable[tuple[int, str]]) -> Outline:
        merged = sorted({*self.headings, *islice(headings, MAX_HEADINGS)})
        return replace(self, headings=tuple(merged[:MAX_HEADINGS]))


@dataclass(frozen=True)
class Location:
    """A chunk's place: characters [char_start, char_end) of the stored text, the pages it spans (PDFs), the nearest
    heading above it, the slide it starts on (presentations), the sheet and rows it spans (spreadsheets)."""

    char_start: int | None
    char_end: int | None
    page: int | None = None
    page_end: int | None = None
    heading: str | None = None
    slide: int | None = None
    sheet: str | None = None
    row_start: int | None = None
    row_end: int | None = None


def markdown_headings(text: str) -> list[tuple[int, str]]:
    """The ATX headings (`# Title` … `###### Title`) of a text, as (offset of the line, heading)."""
    found = ((m.start(), m.group(2).strip()[:HEADING_MAX_CHARS]) for m in _ATX.finditer(text) if m.group(2).strip())
    return list(islice(found, MAX_HEADINGS))


def line_headings(text: str, titles: Sequence[str]) -> list[tuple[int, str]]:
    """Where the given heading texts (a page's <h1>…<h6>, in document order) stand as whole lines in `text`,
    searched in order; a heading that is not found is skipped."""
    found: list[tuple[int, str]] = []
    pos = 0
    for raw in titles:
        title = " ".join(raw.split())
        if not title:
            continue
        at = _line_at(text, title, pos)
        if at is not None:
            found.append((at, title[:HEADING_MAX_CHARS]))
            pos = at + len(title)
    return found


def _line_at(text: str, line: str, start: int) -> int | None:
    at = text.find(line, start)
    while at >= 0:
        end = at + len(line)
        if (at == 0 or text[at - 1] == "\n") and (end == len(text) or text[end] == "\n"):
            return at
        at = text.find(line, at + 1)
    return None


def locate(text: str, bodies: Sequence[str]) -> list[tuple[int, int] | None]:
    """Where each chunk body (in order) stands in `text`: its first occurrence from 60 % into the previous chunk
    (chunks overlap by at most some 30 %: `chunking.chunk_spans`; a text that repeats itself is not matched against
    an earlier repetition), else from the start; None for a body that is not in the text."""
    spans: list[tuple[int, int] | None] = []
    cursor = 0
    for body in bodies:
        at = text.find(body, cursor) if body else -1
        if at < 0 and body:
            at = text.find(body)
        if at < 0:
            spans.append(None)
            continue
        spans.append((at, at + len(body)))
        cursor = at + max(1, len(body) * 3 // 5)
    return spans


class _Index:
    """An outline's offsets as sorted lists, built once for the many chunks located against it."""

    def __init__(self, outline: Outline) -> None:
        self.outline = outline
        self.pages = [o for o, _ in outline.pages]
        self.headings = [o for o, _ in outline.headings]
        self.slides = [o for o, _ in outline.slides]
        self.sheets = [o for o, _ in outline.sheets]
        self.rows = [o for o, _ in outline.rows]

    def locate(self, span: tuple[int, int] | None) -> Location:
        if span is None:
            return Location(None, None)
        o = self.outline
        start, end = span
        last_char = max(start, end - 1)
        page = page_end = heading = slide = sheet = row_start = row_end = None
        if o.pages:
            first = max(bisect.bisect_right(self.pages, start) - 1, 0)
            last = max(bisect.bisect_right(self.pages, last_char) - 1, first)
            page, page_end = o.pages[first][1], o.pages[last][1]
        if o.headings:
            at = bisect.bisect_right(self.headings, start) - 1
            heading = o.headings[at][1] if at >= 0 else None
        if o.slides:
            slide = o.slides[max(bisect.bisect_right(self.slides, start) - 1, 0)][1]
        if o.sheets:
            at = max(bisect.bisect_right(self.sheets, start) - 1, 0)
            sheet = o.sheets[at][1]
            low = self.sheets[at]
            high = self.sheets[at + 1] if at + 1 < len(self.sheets) else None
            row_start, row_end = self._rows(start, last_char, low, high)
        return Location(start, end, page, page_end, heading, slide, sheet, row_start, row_end)

    def _rows(self, start: int, last_char: int, low: int, high: int | None) -> tuple[int | None, int | None]:
        """The first and last rows of the sheet starting at `low` (and ending before `high`) that characters
        [start, last_char] touch; None where none does (a passage of the sheet's title alone)."""
        first = max(bisect.bisect_right(self.rows, start) - 1, bisect.bisect_left(self.rows, low))
        last = bisect.bisect_right(self.rows, last_char if high is None else min(last_char, high - 1)) - 1
        if first >= len(self.rows) or last < first or (high is not None and self.rows[first] >= high):
            return None, None
        return self.outline.rows[first][1], self.outline.rows[last][1]


def location(span: tuple[int, int] | None, outline: Outline) -> Location:
    """The location of a chunk at `span` of the text whose outline is given."""
    return _Index(outline).locate(span)


def locations(spans: Sequence[tuple[int, int] | None], outline: Outline) -> list[Location]:
    index = _Index(outline)
    return [index.locate(s) for s in spans]


def title_prefix(text: str, title: str | None) -> int:
    """How many characters of `text` its opening `title` takes, with the white space after it (0 when the text does
    not open with the title, word for word, or is nothing but the title): passages shown without it (issue 51)."""
    words = (title or "").split()
    if not words:
        return 0
    pos = 0
    for word in words:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        end = pos
        while end < len(text) and not text[end].isspace():
            end += 1
        if text[pos:end].casefold() != word.casefold():
            return 0
        pos = end
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos if pos < len(text) and pos > 0 and text[pos - 1].isspace() else 0


_HYPHENS = ("-", "\u00ad", "\ufffe", "\u2010")
_END = re.compile(r"[.!?:;…][\"'”’)\]]*$")
_BULLET = re.compile(r"^(?:[•◦▪‣*–—-]\s|\(?\d{1,3}[.)]\s|\(?[a-z][.)]\s)")


def reflow(page: str) -> str:
    """A PDF page's lines as paragraphs (issue 51): a line that continues a sentence is joined to the next one (a
    word broken by a hyphen at a line's end joined whole); a short line before a capital (a heading), a list item,
    a blank line and a short line that ends a sentence end their paragraph. Paragraphs are apart by a blank line;
    the result is in the stored form (`normalize_text`)."""
    page = page.replace("\ufffe\n", "").replace("\ufffe", "")  # pdfium's mark of a word hyphenated at a line's end
    lines = [line.strip() for line in normalize_whitespace(page).split("\n")]
    widths = sorted(len(line) for line in lines if line)
    if len(widths) < 2:
        return normalize_text(page)
    full = widths[len(widths) * 3 // 4] * 0.8  # a line this long runs to the margin
    paragraphs: list[str] = []
    current = ""
    for i, line in enumerate(lines):
        if not line:
            if current:
                paragraphs.append(current)
            current = ""
            continue
        if current and current[-1:] in _HYPHENS and current[-2:-1].isalpha() and (
                line[:1].islower() or current[-1:] != "-"):
            current = current[:-1] + line  # a word broken at the line's end (pdfium marks soft hyphens U+FFFE)
        else:
            current = f"{current} {line}" if current else line
        after = lines[i + 1] if i + 1 < len(lines) else ""
        if not after:
            continue  # a blank line or the end closes it
        short = len(line) < full
        if _BULLET.match(after) or (short and (_END.search(line) or after[:1].isupper() and line[-1:] != ",")):
            paragraphs.append(current)
            current = ""
    if current:
        paragraphs.append(current)
    return normalize_text("\n\n".join(paragraphs))


def joined_pages(pages: Sequence[tuple[int, str]]) -> tuple[str, Outline]:
    """Page texts `(page number, text)` as one normalised text (pages apart by a blank line; empty pages left
    out) and the outline of where each page starts."""
    parts: list[str] = []
    starts: list[tuple[int, int]] = []
    pos = 0
    for number, raw in pages:
        page = normalize_text(raw)
        if not page:
            continue
        if parts:
            pos += 2
        starts.append((pos, number))
        parts.append(page)
        pos += len(page)
    return "\n\n".join(parts), Outline(pages=tuple(starts))


def page_outline(text: str, pages: Sequence[tuple[int, str]]) -> Outline:
    """Where each page starts in a PDF's stored text, from its pages' text layers read again (a PDF stored before
    pages were kept): exactly when the text is those pages joined; else each page found in order, a page without a
    text layer (OCRed when stored) starting where the page before it ended."""
    for form in (pages, [(n, reflow(t)) for n, t in pages]):  # stored as read (before issue 51), or reflowed
        joined, outline = joined_pages(form)
        if joined == text:
            return outline
    pages = [(n, reflow(t)) for n, t in pages] if "\n\n" in text else pages
    starts: list[tuple[int, int]] = []
    pos, pending = 0, None  # pending: the first page since the last one found, when it had no text to find
    for number, raw in pages:
        page = normalize_text(raw)
        at = text.find(page, pos) if page else -1
        if at < 0:
            pending = pending if pending is not None else number
            continue
        if pending is not None and at > pos + 2:
            starts.append((pos + 2 if starts else 0, pending))
        starts.append((at, number))
        pos, pending = at + len(page), None
    if pending is not None and pos + 2 < len(text):
        starts.append((pos + 2 if starts else 0, pending))
    return Outline(pages=tuple(sorted(starts)))
