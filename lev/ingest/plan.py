"""The plan step: from what was acquired (and how many chunks its text makes), what is stored and what follows:
the item's first state, the quota to reserve, the job that finishes it, whether its chunks are embedded now.
Pure: no I/O. Chunking (`chunk`) runs before it, off the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lev.core.errors import ingest_failed
from lev.ingest import followups
from lev.ingest.acquire import Acquired, Captions, Recording, Source, Text, Unread
from lev.ingest.chunking import Passages, passages, timed_passages
from lev.ingest.formats import INLINE_KINDS
from lev.plumbing import offload
from lev.store import lifecycle
from lev.store.locations import Location, Outline

INLINE_CHUNK_LIMIT = 60  # more chunks than this: stored now, embedded by the worker (`processing`)


@dataclass
class Chunks:
    """A text cut into chunk bodies and, once embedded, their vectors; where each chunk stands in the stored text
    (`text`, normalised, with its `outline`)."""

    bodies: list[str] = field(default_factory=list)
    vectors: list[list[float]] = field(default_factory=list)
    times: list[tuple[float, float]] | None = None  # (start, end) seconds per chunk of a timed transcript
    indexed_chars: int | None = None  # the cap on chunks stopped them here (None: the whole text is indexed)
    locations: list[Location] = field(default_factory=list)
    text: str | None = None
    outline: Outline = field(default_factory=Outline)

    @classmethod
    def of(cls, p: Passages) -> Chunks:
        return cls(p.bodies, times=p.times, indexed_chars=p.indexed_chars, locations=p.locations, text=p.text,
                   outline=p.outline)


async def cut_text(body: str, title: str | None, max_chunks: int, headings: Sequence[str] = (),
                   outline: Outline | None = None) -> Chunks:
    """The chunks of `body` (at most `max_chunks`) and where each stands in its stored form, cut in a child process
    when it is large."""
    if not body.strip():
        return Chunks()
    for _ in range(2):  # a child that died (its pool recycled or broken under it) gets one more try in a new one
        try:
            return Chunks.of(await offload.run(passages, body, title, max_chunks, tuple(headings), outline,
                                               size=len(body)))
        except offload.OffloadFailed:
            continue
    raise ingest_failed("the text could not be cut into passages (its worker stopped)")


@dataclass(frozen=True)
class Plan:
    kind: str
    title: str | None
    source: Source
    metadata: dict[str, Any]
    state: lifecycle.State
    text: str | None = None  # normalised: the text the chunks are cut from
    outline: Outline = field(default_factory=Outline)
    transcript: str | None = None
    duration: float | None = None
    quota_seconds: float | None = None  # transcription reserved against the monthly quota when stored
    job: str | None = None  # the job that finishes the content (followups), None when it is stored ready
    embed_now: bool = False


async def chunk(acquired: Acquired, max_chunks: int) -> Chunks:
    """The chunks of what was acquired (none for what a job reads later), at most `max_chunks`."""
    if isinstance(acquired, Text) and acquired.body.strip():
        return await cut_text(acquired.body, acquired.title, max_chunks, acquired.headings, acquired.outline)
    if isinstance(acquired, Captions):
        return Chunks.of(await asyncio.to_thread(timed_passages, acquired.segments, acquired.title))
    return Chunks()


def plan(acquired: Acquired, chunks: Chunks) -> Plan:
    """What to store for `acquired` and what follows it; 400 ingest_failed for a snippet or page without text."""
    a = acquired
    chunk_count = len(chunks.bodies)
    if isinstance(a, Text):
        if chunk_count == 0 and a.source.path is None and a.kind in ("text", "url", *INLINE_KINDS):
            raise ingest_failed("there is no text to store")
        inline = chunk_count <= INLINE_CHUNK_LIMIT
        return Plan(a.kind, a.title, a.source, a.metadata, lifecycle.start(a.kind, ready=inline),
                    text=chunks.text or None, outline=chunks.outline, job=None if inline else followups.EMBED,
                    embed_now=inline)
    if isinstance(a, Unread):
        return Plan(a.kind, a.title, a.source, a.metadata, lifecycle.start(a.kind, ready=False),
                    job=followups.EXTRACT)
    if isinstance(a, Captions):
        return Plan(a.kind, a.title, a.source, a.metadata, lifecycle.start(a.kind, ready=True),
                    transcript=chunks.text, duration=a.duration, embed_now=True)
    assert isinstance(a, Recording)
    return Plan(a.kind, a.title, a.source, a.metadata, lifecycle.start(a.kind, ready=False), duration=a.duration,
                quota_seconds=a.duration or 0.0, job=followups.TRANSCRIBE)
