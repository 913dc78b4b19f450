"""The item page's reader view: the item's text cut into parts (a 2 MB text is read part by part, never sent to the
browser whole), each part in paragraphs of runs, each run knowing its offset into the text (`at`) and the
highlights covering it, so the page can mark them (`<mark data-highlight-id>`) and its script can turn a selection
back into offsets."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lev.store.locations import PATH_SEPARATOR, Outline

PART_CHARS = 30_000  # about ten pages of a book: instant to render, few parts for a long article
PART_LINES = 2_000  # and at most this many lines (a PDF of one-letter lines made 15,000 paragraphs of a part)
MARKS_PER_RUN = 32  # the oldest highlights covering a run that it names (the page marks the first)
_LINES = re.compile(rf"(?:[^\n]*\n){{{PART_LINES}}}")


@dataclass
class Run:
    at: int  # offset of the run's first character in the item's text
    text: str
    highlight_ids: list[str] = field(default_factory=list)  # every highlight covering the run, oldest first
    anchors: list[str] = field(default_factory=list)  # the highlights that start here (the page's #h-… targets)


@dataclass
class Paragraph:
    at: int
    runs: list[Run]
    page: int | None = None  # a PDF page that starts in this paragraph (shown as a heading before it)
    moment: float | None = None  # a recording's second this paragraph is spoken at (a ▶ before it)
    label: str | None = None  # where a part of a document starts here (`Slide 3`, shown as a heading before it)
    heading: bool = False  # the paragraph is one of the document's headings (a sheet's name, a chapter's title)


@dataclass
class View:
    part: int  # 1-based
    parts: int
    start: int
    end: int
    paragraphs: list[Paragraph]
    total_chars: int
    starts: list[int]  # where every part starts


def boundaries(text: str, size: int = PART_CHARS) -> list[int]:
    """Where each part starts: every `size` characters or a little before, at a line break (else a space)."""
    starts = [0]
    n = len(text)
    while True:
        start = starts[-1]
        lines = _LINES.match(text, start, min(n, start + size))
        if lines is not None and lines.end() < n:  # many short lines: the part ends after PART_LINES of them
            starts.append(lines.end())
            continue
        if start + size >= n:
            return starts
        low, high = start + size // 2, start + size
        cut = text.rfind("\n", low, high)
        if cut == -1:
            cut = text.rfind(" ", low, high)
        starts.append(cut + 1 if cut != -1 else high)


def part_of(starts: list[int], offset: int) -> int:
    """The 1-based part holding `offset`."""
    return max(1, bisect.bisect_right(starts, offset))


def heading_lines(text: str, outline: Outline) -> list[int]:
    """Where a document's own headings stand as lines of its text (a heading path's last part at its offset; an
    e-mail's subject, which has no line of its own, is none)."""
    return [at for at, path in outline.headings if text.startswith(path.rsplit(PATH_SEPARATOR, 1)[-1], at)]


def view(text: str, highlights: list[dict[str, Any]], part: int = 1, size: int = PART_CHARS,
         showing: str | None = None, pages: Sequence[tuple[int, int]] = (),
         moments: Sequence[tuple[int, float]] = (), labels: Sequence[tuple[int, str]] = (),
         headings: Sequence[int] = ()) -> View:
    """Part `part` (clamped) of the text, or the part where highlight `showing` starts, in paragraphs (one per
    line) of runs split where highlights start and end. `pages` ((offset, page number): where a PDF's pages start)
    and `moments` ((offset, second): where a recording's passages start) mark the paragraphs they fall in; `labels`
    ((offset, label): where a slide starts) the paragraph starting there, `headings` (offsets) the heading lines."""
    starts = boundaries(text, size)
    shown = next((h for h in highlights if h["id"] == showing), None)
    if shown is not None:
        part = part_of(starts, shown["char_start"])
    part = min(max(1, part), len(starts))
    start = starts[part - 1]
    end = starts[part] if part < len(starts) else len(text)
    inside = [h for h in highlights if h["char_start"] < end and h["char_end"] > start]
    cuts = sorted({c for h in inside for c in (h["char_start"], h["char_end"]) if start < c < end})
    marks = _Marks(inside)
    page_at, moment_at = [at for at, _ in pages], [at for at, _ in moments]
    paragraphs: list[Paragraph] = []
    label_at, heading_at = dict(labels), set(headings)
    pos = start
    for line in text[start:end].split("\n"):
        line_end = pos + len(line)
        if line.strip():
            page = bisect.bisect_left(page_at, pos)
            moment = bisect.bisect_left(moment_at, pos)
            paragraphs.append(Paragraph(pos, _runs(text, pos, line_end, cuts, marks),
                                        pages[page][1] if page < len(pages) and page_at[page] <= line_end else None,
                                        moments[moment][1] if moment < len(moments) and moment_at[moment] <= line_end
                                        else None, label_at.get(pos), pos in heading_at))
        pos = line_end + 1
    return View(part, len(starts), start, end, paragraphs, len(text), starts)


class _Marks:
    """The highlights covering each run, runs taken in the text's order: a sweep that adds a highlight where it
    starts and drops it where it ends (its list kept oldest first), not a look at every highlight for every run."""

    def __init__(self, inside: list[dict[str, Any]]) -> None:
        self.inside = inside
        self.by_start = sorted(range(len(inside)), key=lambda i: inside[i]["char_start"])
        self.by_end = sorted(range(len(inside)), key=lambda i: inside[i]["char_end"])
        self.added = self.dropped = 0
        self.active: list[int] = []  # indices into `inside`: oldest first
        self.starting: dict[int, list[int]] = {}
        for i, h in enumerate(inside):
            self.starting.setdefault(h["char_start"], []).append(i)

    def covering(self, a: int, b: int) -> list[int]:
        """The highlights covering [a, b), for a and b never smaller than the last call's."""
        while self.added < len(self.by_start) and self.inside[self.by_start[self.added]]["char_start"] < b:
            bisect.insort(self.active, self.by_start[self.added])
            self.added += 1
        while self.dropped < len(self.by_end) and self.inside[self.by_end[self.dropped]]["char_end"] <= a:
            gone = self.by_end[self.dropped]
            at = bisect.bisect_left(self.active, gone)
            if at < len(self.active) and self.active[at] == gone:
                del self.active[at]
            self.dropped += 1
        return self.active


def _runs(text: str, start: int, end: int, cuts: list[int], marks: _Marks) -> list[Run]:
    edges = [start, *cuts[bisect.bisect_right(cuts, start):bisect.bisect_left(cuts, end)], end]
    runs = []
    for a, b in zip(edges, edges[1:], strict=False):
        if a == b:
            continue
        covering = marks.covering(a, b)
        anchors = [marks.inside[i]["id"] for i in marks.starting.get(a, ())]
        runs.append(Run(a, text[a:b], [marks.inside[i]["id"] for i in covering[:MARKS_PER_RUN]], anchors))
    return runs
