"""The item page's reader view: the item's text cut into parts (a 2 MB text is read part by part, never sent to the
browser whole), each part in paragraphs of runs, each run knowing its offset into the text (`at`) and the
highlights covering it, so the page can mark them (`<mark data-highlight-id>`) and its script can turn a selection
back into offsets."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

PART_CHARS = 30_000  # about ten pages of a book: instant to render, few parts for a long article


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
    while starts[-1] + size < n:
        start = starts[-1]
        low, high = start + size // 2, start + size
        cut = text.rfind("\n", low, high)
        if cut == -1:
            cut = text.rfind(" ", low, high)
        starts.append(cut + 1 if cut != -1 else high)
    return starts


def part_of(starts: list[int], offset: int) -> int:
    """The 1-based part holding `offset`."""
    return max(1, bisect.bisect_right(starts, offset))


def view(text: str, highlights: list[dict[str, Any]], part: int = 1, size: int = PART_CHARS,
         showing: str | None = None, pages: Sequence[tuple[int, int]] = (),
         moments: Sequence[tuple[int, float]] = ()) -> View:
    """Part `part` (clamped) of the text, or the part where highlight `showing` starts, in paragraphs (one per
    line) of runs split where highlights start and end. `pages` ((offset, page number): where a PDF's pages start)
    and `moments` ((offset, second): where a recording's passages start) mark the paragraphs they fall in."""
    starts = boundaries(text, size)
    shown = next((h for h in highlights if h["id"] == showing), None)
    if shown is not None:
        part = part_of(starts, shown["char_start"])
    part = min(max(1, part), len(starts))
    start = starts[part - 1]
    end = starts[part] if part < len(starts) else len(text)
    inside = [h for h in highlights if h["char_start"] < end and h["char_end"] > start]
    cuts = sorted({c for h in inside for c in (h["char_start"], h["char_end"]) if start < c < end})
    paragraphs: list[Paragraph] = []
    pos = start
    for line in text[start:end].split("\n"):
        line_end = pos + len(line)
        if line.strip():
            paragraphs.append(Paragraph(pos, _runs(text, pos, line_end, cuts, inside),
                                        next((n for at, n in pages if pos <= at <= line_end), None),
                                        next((sec for at, sec in moments if pos <= at <= line_end), None)))
        pos = line_end + 1
    return View(part, len(starts), start, end, paragraphs, len(text), starts)


def _runs(text: str, start: int, end: int, cuts: list[int], inside: list[dict[str, Any]]) -> list[Run]:
    edges = [start, *cuts[bisect.bisect_right(cuts, start):bisect.bisect_left(cuts, end)], end]
    runs = []
    for a, b in zip(edges, edges[1:], strict=False):
        if a == b:
            continue
        covering = [h for h in inside if h["char_start"] < b and h["char_end"] > a]
        anchors = [h["id"] for h in covering if h["char_start"] == a]
        runs.append(Run(a, text[a:b], [h["id"] for h in covering], anchors))
    return runs
