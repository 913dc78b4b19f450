"""Split item text into overlapping chunks sized in real MiniLM wordpieces.

Each chunk is embedded as "title\\n\\nchunk" (see `embed_input`), which must fit the model's 256-token
window including [CLS]/[SEP]; chunk capacity is therefore shrunk by the title's token count.

The text is tokenized once with the model's own tokenizer; chunks end at the strongest boundary
(paragraph > line > sentence > word) in the last half of each token window, and the next chunk
starts at a boundary about 15% of the capacity earlier. semantic-text-splitter does the same with
nicer heuristics but re-tokenizes candidate spans: it measured 4 s per MB of prose and grew
super-linearly on unpunctuated text (13 s for 1 MB), which is too slow for in-request ingest.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lev.embedding.minilm import tokenizer
from lev.plumbing.ports import Embedder
from lev.store.locations import Location, Outline, line_headings, locations, markdown_headings, normalize_whitespace

CHUNK_TOKENS = 200  # budget for title + chunk; leaves margin under the 256-token model window
MIN_CHUNK_TOKENS = 64
TITLE_MAX_TOKENS = 48
OVERLAP_RATIO = 0.15
MAX_CHUNK_CHARS = 4000  # a single huge "word" is one [UNK] token; keep stored chunks bounded anyway

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


def _split_tokens(n: int, scores: list[int], capacity: int, overlap: int) -> list[tuple[int, int]]:
    """Token ranges [start, end) of the chunks."""
    spans: list[tuple[int, int]] = []
    start = 0
    while start < n:
        if n - start <= capacity:
            spans.append((start, n))
            break
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


def chunk_spans(text: str, title: str | None) -> list[tuple[int, int]]:
    """Character ranges [start, end) of the chunks of `text`, which must already be `normalize_whitespace`d;
    each range holds no surrounding white space. [] for blank text."""
    if not text:
        return []
    capacity = capacity_for(title)
    enc = tokenizer().encode(text, add_special_tokens=False)
    offsets: list[tuple[int, int]] = list(enc.offsets)
    if not offsets:
        return []
    scores = _boundaries(text, offsets)
    spans: list[tuple[int, int]] = []
    for start, end in _split_tokens(len(offsets), scores, capacity, int(capacity * OVERLAP_RATIO)):
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
    text = normalize_whitespace(text)
    return [text[a:b] for a, b in chunk_spans(text, title)]


@dataclass
class Passages:
    """A text as stored (normalised: `text`), its outline, the chunk bodies cut from it and where each stands;
    `times` gives each chunk's seconds in a recording."""

    text: str = ""
    outline: Outline = field(default_factory=Outline)
    bodies: list[str] = field(default_factory=list)
    locations: list[Location] = field(default_factory=list)
    times: list[tuple[float, float]] | None = None


def passages(text: str, title: str | None, *, headings: Sequence[str] = (), outline: Outline | None = None) -> Passages:
    """`text` normalised, with its outline (the given one, markdown headings, the `headings` found as lines) and
    its chunks, each with its location: `Passages.text[char_start:char_end]` is the chunk's body."""
    norm = normalize_whitespace(text)
    found = (outline or Outline()).with_headings([*markdown_headings(norm), *line_headings(norm, headings)])
    spans = chunk_spans(norm, title)
    return Passages(norm, found, [norm[a:b] for a, b in spans], locations(spans, found))


def timed_passages(segments: list[dict[str, Any]], title: str | None) -> Passages:
    """A transcript given as timed segments (`{start, end, text}`, seconds): its text (the segments' texts, one per
    line; this is what is stored as the transcript), its chunks and each chunk's seconds (the start of its first
    segment, the end of its last)."""
    lines: list[str] = []
    ranges: list[tuple[int, int, float, float]] = []  # each line's place in the joined text and its times
    pos = 0
    for seg in segments:
        line = normalize_whitespace(" ".join(str(seg.get("text") or "").split()))
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

