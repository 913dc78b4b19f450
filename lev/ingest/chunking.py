"""Split item text into overlapping chunks sized in real MiniLM wordpieces.

Each chunk is embedded as "title\\n\\nchunk" (see `embed_input`), which must fit the model's 256-token
window including [CLS]/[SEP]; chunk capacity is therefore shrunk by the title's token count.

The text is tokenized once with the model's own tokenizer; chunks end at the strongest boundary
(paragraph > line > sentence > word) in the last half of each token window, and the next chunk
starts at a boundary about 15% of the capacity earlier. semantic-text-splitter does the same with
nicer heuristics but re-tokenizes candidate spans: it measured 4 s per MB of prose and grew
super-linearly on unpunctuated text (13 s for 1 MB), which is too slow for in-request ingest.

The text chunks are cut from is the one stored (`lev.store.locations.normalize_text`), so each chunk's location
slices it. Bounded work per item: a run of more than `MAX_RUN` of one character (5 MiB of quotes, a line of dashes)
is cut to `MAX_RUN` before chunking, the text is tokenized a slice at a time only as far as `max_chunks` chunks
reach, and what lies beyond is not indexed (`Passages.indexed_chars` says where it stopped). Large inputs run in a
child process (`passages` is what `lev.plumbing.offload` runs), never on the event loop's process.
"""

from __future__ import annotations

import asyncio
import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lev.embedding.minilm import tokenizer
from lev.plumbing.ports import Embedder
from lev.store.locations import (
    MAX_RUN,
    PATH_SEPARATOR,
    Location,
    Outline,
    line_headings,
    locations,
    markdown_headings,
    normalize_text,
    normalize_whitespace,
)

CHUNK_TOKENS = 200  # budget for title + chunk; leaves margin under the 256-token model window
MIN_CHUNK_TOKENS = 64
TITLE_MAX_TOKENS = 48
OVERLAP_RATIO = 0.15
MAX_CHUNK_CHARS = 4000  # a single huge "word" is one [UNK] token; keep stored chunks bounded anyway

SLICE_CHARS = 200_000  # tokenized at a time, up to what the chunk cap needs
__all__ = ["MAX_RUN", "normalize_text", "normalize_whitespace"]  # the stored text's form lives in store.locations
_SENTENCE_END = re.compile(r"[.!?;:\u2026\u3002\uff01\uff1f][\"'\u201d\u2019)\]]*$")

# boundary strength before a token, judged by the gap since the previous token
_PARAGRAPH, _LINE, _SENTENCE, _WORD, _NONE = 4, 3, 2, 1, 0


def token_count(text: str) -> int:
    """Wordpieces of `text` without special tokens."""
    return len(tokenizer().encode(text, add_special_tokens=False).ids)


def clip_title(title: str | None) -> str:
    """The title as embedded: whitespace-normalised and cut to TITLE_MAX_TOKENS wordpieces."""
    if not title:
        return ""
    title = " ".join(title.split())
    enc = tokenizer().encode(title, add_special_tokens=False)
    if len(enc.ids) <= TITLE_MAX_TOKENS:
        return title
    return title[: enc.offsets[TITLE_MAX_TOKENS - 1][1]].rstrip()


def capacity_for(title: str | None) -> int:
    """Chunk capacity in wordpieces once the (clipped) title and its separator are prepended."""
    title = clip_title(title)
    used = token_count(title) + 2 if title else 0
    return max(MIN_CHUNK_TOKENS, CHUNK_TOKENS - used)


def _boundaries(text: str, offsets: list[tuple[int, int]]) -> list[int]:
    """Strength of a split before each token (index 0 is the text start)."""
    scores = [_PARAGRAPH] * len(offsets)
    for i in range(1, len(offsets)):
        prev_end = offsets[i - 1][1]
        gap = text[prev_end : offsets[i][0]]
        if not gap:
            scores[i] = _NONE
        elif "\n\n" in gap:
            scores[i] = _PARAGRAPH
        elif "\n" in gap:
            scores[i] = _LINE
        elif _SENTENCE_END.search(text, max(0, prev_end - 3), prev_end):
            scores[i] = _SENTENCE
        else:
            scores[i] = _WORD
    return scores


def _split_tokens(n: int, scores: list[int], capacity: int, overlap: int,
                  breaks: Sequence[int] = ()) -> list[tuple[int, int]]:
    """Token ranges [start, end) of the chunks; no chunk spans one of the (sorted) token indices `breaks`."""
    spans: list[tuple[int, int]] = []
    start = 0
    while start < n:
        at = bisect.bisect_right(breaks, start)
        limit = breaks[at] if at < len(breaks) and breaks[at] < n else n
        if limit - start <= capacity:
            spans.append((start, limit))
            start = limit
            continue
        hard_end = start + capacity
        # best boundary in the back half of the window: strongest first, then latest
        end = max(range(start + capacity // 2, hard_end + 1), key=lambda i: (scores[i], i))
        if scores[end] == _NONE:
            end = hard_end
        spans.append((start, end))
        nxt = end
        if overlap > 0:
            lo = max(start + 1, end - overlap)
            cand = max(range(lo, end), key=lambda i: (scores[i], -i), default=end)
            if scores[cand] > _NONE:
                nxt = cand
        start = nxt
    return spans


def _offsets(text: str, max_tokens: int | None) -> list[tuple[int, int]]:
    """The wordpieces' character ranges, tokenized a slice at a time (cut at a line or a space) until `max_tokens`
    are found; the whole text when `max_tokens` is None."""
    if max_tokens is None:
        return list(tokenizer().encode(text, add_special_tokens=False).offsets)
    offsets: list[tuple[int, int]] = []
    pos = 0
    while pos < len(text) and len(offsets) < max_tokens:
        end = min(len(text), pos + SLICE_CHARS)
        if end < len(text):
            cut = max(text.rfind("\n", pos + SLICE_CHARS // 2, end), text.rfind(" ", end - SLICE_CHARS // 4, end))
            end = cut if cut > pos else end
        enc = tokenizer().encode(text[pos:end], add_special_tokens=False)
        offsets.extend((a + pos, b + pos) for a, b in enc.offsets)
        pos = end
    return offsets


def chunk_spans(text: str, title: str | None, max_chunks: int | None = None,
                breaks: Sequence[int] = ()) -> list[tuple[int, int]]:
    """Character ranges [start, end) of the chunks of `text`, which must already be `normalize_whitespace`d;
    each range holds no surrounding white space. [] for blank text. With `max_chunks`, the first ones only (the
    text is tokenized only as far as they reach). No chunk spans one of the character offsets `breaks` (where a
    slide or a sheet starts)."""
    if not text:
        return []
    capacity = capacity_for(title)
    offsets = _offsets(text, None if max_chunks is None else (max_chunks + 1) * capacity)
    if not offsets:
        return []
    scores = _boundaries(text, offsets)
    starts = [a for a, _ in offsets]
    cuts = sorted({i for i in (bisect.bisect_left(starts, b) for b in breaks) if 0 < i < len(offsets)})
    spans: list[tuple[int, int]] = []
    for start, end in _split_tokens(len(offsets), scores, capacity, int(capacity * OVERLAP_RATIO), cuts):
        if max_chunks is not None and len(spans) >= max_chunks:
            break
        lo, hi = _strip(text, offsets[start][0], offsets[end - 1][1])
        while hi - lo > MAX_CHUNK_CHARS:
            cut = text.rfind(" ", lo + MAX_CHUNK_CHARS // 2, lo + MAX_CHUNK_CHARS)
            cut = cut if cut > lo else lo + MAX_CHUNK_CHARS
            spans.append(_strip(text, lo, cut))
            lo, hi = _strip(text, cut, hi)
        if hi > lo:
            spans.append((lo, hi))
    return [(a, b) for a, b in spans if b > a]


def _strip(text: str, lo: int, hi: int) -> tuple[int, int]:
    while lo < hi and text[lo].isspace():
        lo += 1
    while hi > lo and text[hi - 1].isspace():
        hi -= 1
    return lo, hi


def chunk_text(text: str, title: str | None) -> list[str]:
    """Chunk bodies (without the title) whose `embed_input` fits the model window; [] for blank text."""
    text = normalize_text(text)
    return [text[a:b] for a, b in chunk_spans(text, title)]


@dataclass
class Cut:
    """A text's chunk bodies, at most a cap of them; `indexed_chars` is how much of the normalised text they cover
    when the cap stopped them (None: all of it), `total_chars` its length."""

    bodies: list[str] = field(default_factory=list)
    indexed_chars: int | None = None
    total_chars: int = 0


def chunk_text_capped(text: str, title: str | None, max_chunks: int) -> Cut:
    """`chunk_text`, at most `max_chunks` of them (LEV_MAX_CHUNKS_PER_ITEM)."""
    text = normalize_text(text)
    spans = chunk_spans(text, title, max_chunks + 1)
    kept = spans[:max_chunks]
    cut = kept[-1][1] if len(spans) > max_chunks else None
    return Cut([text[a:b] for a, b in kept], cut, len(text))


@dataclass
class Passages:
    """A text as stored (`normalize_text`: `text`), its outline, the chunk bodies cut from it (at most a cap of them:
    `indexed_chars` is where the cap stopped them, None when the whole text is indexed) and where each stands;
    `times` gives each chunk's seconds in a recording."""

    text: str = ""
    outline: Outline = field(default_factory=Outline)
    bodies: list[str] = field(default_factory=list)
    locations: list[Location] = field(default_factory=list)
    times: list[tuple[float, float]] | None = None
    indexed_chars: int | None = None


def passages(text: str, title: str | None, max_chunks: int | None = None, headings: Sequence[str] = (),
             outline: Outline | None = None) -> Passages:
    """`text` in its stored form, with its outline (the given one, markdown headings, the `headings` found as
    lines; a structured outline, a document's own, alone) and its chunks (at most `max_chunks`), each with its
    location: `Passages.text[char_start:char_end]` is the chunk's body. A module-level function of picklable values:
    `lev.plumbing.offload` runs it."""
    norm = normalize_text(text)
    found = outline or Outline()
    if not found.structured:
        found = found.with_headings([*markdown_headings(norm), *line_headings(norm, headings)])
    # a passage stays on its slide or sheet, and in a document's top-level section (an e-book's chapter)
    breaks = [o for o, _ in found.slides] + [o for o, _ in found.sheets]
    if found.structured:
        breaks += [o for o, h in found.headings if PATH_SEPARATOR not in h]
    spans = chunk_spans(norm, title, None if max_chunks is None else max_chunks + 1, breaks)
    kept = spans if max_chunks is None else spans[:max_chunks]
    cut = kept[-1][1] if max_chunks is not None and len(spans) > max_chunks else None
    return Passages(norm, found, [norm[a:b] for a, b in kept], locations(kept, found), indexed_chars=cut)


def timed_passages(segments: list[dict[str, Any]], title: str | None) -> Passages:
    """A transcript given as timed segments (`{start, end, text}`, seconds): its text (the segments' texts, one per
    line; this is what is stored as the transcript), its chunks and each chunk's seconds (the start of its first
    segment, the end of its last)."""
    lines: list[str] = []
    ranges: list[tuple[int, int, float, float]] = []  # each line's place in the joined text and its times
    pos = 0
    for seg in segments:
        line = normalize_text(" ".join(str(seg.get("text") or "").split()))
        start, end = _seconds(seg.get("start")), _seconds(seg.get("end"))
        if not line or start is None:
            continue
        end = max(start, end if end is not None else start)
        lines.append(line)
        ranges.append((pos, pos + len(line), start, end))
        pos += len(line) + 1
    text = "\n".join(lines)
    spans = chunk_spans(text, title)
    times: list[tuple[float, float]] = []
    for a, b in spans:
        inside = [r for r in ranges if r[0] < b and r[1] > a]
        times.append((min(r[2] for r in inside), max(r[3] for r in inside)))
    return Passages(text, Outline(), [text[a:b] for a, b in spans], locations(spans, Outline()), times)


def timed_chunks(segments: list[dict[str, Any]], title: str | None) -> tuple[list[str], list[tuple[float, float]]]:
    """The chunk bodies of a timed transcript and each one's (start, end) seconds (`timed_passages`)."""
    p = timed_passages(segments, title)
    return p.bodies, p.times or []


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        return None
    return float(value)


def embed_input(title: str | None, chunk: str) -> str:
    """The string that is embedded for a chunk: the clipped title, a blank line, then the chunk."""
    title = clip_title(title)
    return f"{title}\n\n{chunk}" if title else chunk


async def embed_chunks(embedder: Embedder, title: str | None, bodies: list[str]) -> list[list[float]]:
    """The vectors of a content's chunks (each embedded as `embed_input`), computed in a worker thread."""
    return await asyncio.to_thread(embedder.embed, [embed_input(title, b) for b in bodies])

