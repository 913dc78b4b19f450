"""A document's stored text written block by block, with its outline beside it: every reader of a document format
(`lev.ingest.formats`) lays out what it reads here, so that headings, lists, tables, slides and sheet rows become
readable text whose offsets the outline knows exactly.

Each piece is put in the stored form (`normalize_text`) on its own; blocks are apart by a blank line, the lines of
one block by a newline, so the whole text is in its stored form too and `text[offset:]` of every outline mark is
where it says. A text that reaches `max_chars` takes no more pieces (`truncated`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lev.store.locations import HEADING_MAX_CHARS, MAX_HEADINGS, PATH_SEPARATOR, Outline, normalize_text

MAX_ROW_MARKS = 100_000  # rows marked in an outline (2,000 chunks, what an item indexes, hold far fewer)
MAX_CELL_CHARS = 2_000
MAX_COLUMNS = 256


@dataclass(frozen=True)
class Attachment:
    """A file inside a document (an e-mail's attachment): an item of its own when Lev reads its type."""

    filename: str
    mime: str
    data: bytes


@dataclass(frozen=True)
class Document:
    """A document as Lev keeps it: `text` in its stored form (`normalize_text`), `outline` (structured: headings as
    paths `A > B`, slides, sheets, rows) as offsets into it, `title` from the document itself (None: it has none),
    `metadata` (`format`, the document's own properties; for Markdown `tags`, `aliases`, `date`, `links`)."""

    kind: str
    text: str
    title: str | None
    metadata: dict[str, Any] = field(default_factory=dict)
    outline: Outline = field(default_factory=lambda: Outline(structured=True))
    attachments: tuple[Attachment, ...] = ()


def one_line(text: str) -> str:
    """`text` as a single line of the stored form (a heading, a table cell)."""
    return normalize_text(" ".join(str(text).split()))


class Layout:
    """The text and outline of one document, written in reading order."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.truncated = False
        self._parts: list[str] = []
        self._pos = 0
        self._path: list[tuple[int, str]] = []  # (level, heading) from the outermost
        self._headings: list[tuple[int, str]] = []
        self._slides: list[tuple[int, int]] = []
        self._sheets: list[tuple[int, str]] = []
        self._rows: list[tuple[int, int]] = []
        self._first_heading: str | None = None
        self._listing = False  # the last piece was a list item: the next one goes on its block

    @property
    def empty(self) -> bool:
        return not self._parts

    @property
    def first_heading(self) -> str | None:
        """The first heading written (a title when the document has no title of its own)."""
        return self._first_heading

    def _put(self, piece: str, *, new_block: bool) -> int | None:
        """Append a normalised, non-empty piece; its offset, or None when there is no room (or nothing to put)."""
        if not piece or self.truncated:
            return None
        self._listing = False
        sep = ("\n\n" if new_block else "\n") if self._parts else ""
        room = self.max_chars - self._pos - len(sep)
        if len(piece) > room:
            self.truncated = True
            piece = _cut(piece, room)
            if not piece:
                return None
        at = self._pos + len(sep)
        self._parts.append(sep + piece)
        self._pos = at + len(piece)
        return at

    def block(self, text: str) -> int | None:
        """A paragraph (its own line breaks kept); returns where it starts."""
        return self._put(normalize_text(text), new_block=True)

    def line(self, text: str) -> int | None:
        """A line of the current block (a list item, a table row)."""
        return self._put(one_line(text), new_block=False)

    def heading(self, level: int, text: str) -> int | None:
        """A heading of `level` (1 outermost): its own block, and the heading path from here on."""
        title = one_line(text)[:HEADING_MAX_CHARS]
        if not title:
            return None
        while self._path and self._path[-1][0] >= level:
            self._path.pop()
        self._path.append((level, title))
        at = self.block(title)
        if at is not None:
            self._first_heading = self._first_heading or title
            self.mark_heading(at)
        return at

    def section(self, title: str) -> None:
        """A heading path of its own from here on, without a line in the text (an e-mail's subject, a slide
        without a title)."""
        self._path = [(0, one_line(title)[:HEADING_MAX_CHARS])] if title else []
        self.mark_heading(self._next())

    def mark_heading(self, at: int) -> None:
        path = PATH_SEPARATOR.join(t for _, t in self._path)[:HEADING_MAX_CHARS] or None
        if path is None or len(self._headings) >= MAX_HEADINGS:
            return
        if self._headings and self._headings[-1][0] == at:
            self._headings[-1] = (at, path)
        elif not self._headings or self._headings[-1][1] != path:
            self._headings.append((at, path))

    def _next(self) -> int:
        """Where the next block will start."""
        return self._pos + 2 if self._parts else 0

    def item(self, text: str, depth: int = 0, marker: str | None = None) -> int | None:
        """A list item: `- text` (`◦` one level in, `▪` deeper; or the item's own `marker`, such as `2.`), on a
        line of the list's block (a list after anything else starts a block)."""
        body = one_line(text)
        if not body:
            return None
        sign = marker or ("-" if depth <= 0 else "◦" if depth == 1 else "▪")
        at = self._put(f"{sign} {body}", new_block=not self._listing)
        if at is not None:
            self._listing = True
        return at

    def table(self, rows: Sequence[Sequence[str]]) -> None:
        """A table as lines a passage can be understood by alone: with a header row, each later row names its
        columns (`Name: Ada; Role: engineer`); a one-row table is its cells."""
        cells = [[one_line(c)[:MAX_CELL_CHARS] for c in row[:MAX_COLUMNS]] for row in rows]
        cells = [r for r in cells if any(r)]
        if not cells:
            return
        first = True
        if len(cells) == 1:
            self._put(" | ".join(c for c in cells[0] if c), new_block=True)
            return
        header = cells[0]
        for row in cells[1:]:
            line = row_line(header, row)
            if line and self._put(line, new_block=first) is not None:
                first = False

    def slide(self, number: int, title: str | None) -> None:
        """A slide starts: its number marked, its title a heading (else `Slide N`)."""
        self._slides.append((self._next(), number))
        if title and one_line(title):
            self._path = []
            self.heading(1, title)
        else:
            self.section(f"Slide {number}")

    def sheet(self, name: str) -> None:
        """A sheet starts: its name a heading line, its rows marked after it."""
        self._path = []
        at = self.heading(1, name)
        if at is not None:
            self._sheets.append((at, one_line(name)[:HEADING_MAX_CHARS]))

    def row(self, number: int, text: str) -> bool:
        """A sheet's row as one line, marked with its number; False once the text is full."""
        at = self._put(one_line(text), new_block=False)
        if at is None:
            return not self.truncated
        if len(self._rows) < MAX_ROW_MARKS:
            self._rows.append((at, number))
        return True

    def text(self) -> str:
        return "".join(self._parts)

    def document(self, kind: str, title: str | None, metadata: dict[str, Any],
                 attachments: tuple[Attachment, ...] = ()) -> Document:
        """What was written, as a document (its metadata says `truncated` when the text filled up)."""
        meta = {**metadata, **({"truncated": True} if self.truncated else {})}
        title = one_line(title or "")[:500] or None
        return Document(kind, self.text(), title, meta, self.outline(), attachments)

    def outline(self) -> Outline:
        return Outline(headings=tuple(self._headings), slides=tuple(self._slides), sheets=tuple(self._sheets),
                       rows=tuple(self._rows), structured=True)


def _cut(piece: str, room: int) -> str:
    """The start of `piece` that fits `room` characters, cut at a line break or a space when one is near."""
    if room <= 0:
        return ""
    head = piece[:room]
    at = max(head.rfind("\n"), head.rfind(" "))
    return normalize_text(head[:at] if at > room // 2 else head)


def row_line(header: Sequence[str], row: Sequence[str]) -> str:
    """A row with its column names: `Name: Ada; Role: engineer` (a column without a name by its letter)."""
    parts = []
    for i, value in enumerate(row[:MAX_COLUMNS]):
        value = one_line(value)[:MAX_CELL_CHARS]
        if not value:
            continue
        name = header[i] if i < len(header) and header[i] else column_letter(i)
        parts.append(f"{name}: {value}")
    return "; ".join(parts)


def column_letter(index: int) -> str:
    """A spreadsheet column's letters (0 -> A, 26 -> AA)."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters
