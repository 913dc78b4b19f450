"""Storing what the pipeline produced: a new item in one transaction, chunks and vectors (`index_content`), the
jobs that follow a commit. The request path and the jobs both end here.

A content with a stored object (upload, downloaded file) belongs to one upload; a content without one (a page,
a YouTube video) is shared by every user who adds the same canonical URL.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev import runtime
from lev.auth.policy import Principal
from lev.core.errors import not_found, object_missing
from lev.ingest import progress
from lev.ingest.chunking import chunk_text, embed_chunks, timed_chunks
from lev.limits import quota
from store import contents as content_store
from store import uploads as upload_store
from store.db import transaction

INLINE_CHUNK_LIMIT = 60  # more chunks than this: stored now, embedded by the worker (`processing`)
EMBED_BATCH = 64  # chunks the worker embeds between two progress reports
MEDIA_KINDS = ("audio", "video", "youtube")


@dataclass
class Chunks:
    """A text cut into chunk bodies and, unless left to the worker, their vectors."""

    bodies: list[str] = field(default_factory=list)
    vectors: list[list[float]] = field(default_factory=list)
    times: list[tuple[float, float]] | None = None  # (start, end) seconds per chunk of a timed transcript

    @property
    def embedded(self) -> bool:
        return len(self.vectors) == len(self.bodies)


async def prepare(title: str | None, body: str, *, inline_limit: int | None = None) -> Chunks:
    """Chunk `body` and embed the chunks, off the event loop; more than `inline_limit` chunks stay unembedded."""
    bodies = await asyncio.to_thread(chunk_text, body, title) if body.strip() else []
    if inline_limit is not None and len(bodies) > inline_limit:
        return Chunks(bodies)
    return Chunks(bodies, await embed_chunks(runtime.embedder(), title, bodies) if bodies else [])


async def prepare_timed(title: str | None, segments: list[dict[str, Any]]) -> Chunks:
    """Chunk and embed a transcript given as timed segments; each chunk keeps its start and end seconds."""
    bodies, times = await asyncio.to_thread(timed_chunks, segments, title)
    return Chunks(bodies, await embed_chunks(runtime.embedder(), title, bodies) if bodies else [], times)


@dataclass
class Source:
    """Where the bytes came from: the upload path (set once stored) and, for URL ingest, the URL."""

    filename: str
    path: str | None = None
    mime: str | None = None
    size: int | None = None
    url: str | None = None
    canonical: str | None = None

    @property
    def upload(self) -> bool:
        """An object the client uploaded itself (finalize), as opposed to one Lev downloaded."""
        return self.url is None and self.path is not None


@dataclass(frozen=True)
class Stored:
    """An ingest's answer; `new` says this call created the content, so its follow-up jobs are its to queue."""

    status: str
    content_id: uuid.UUID
    item_id: uuid.UUID
    folder_id: uuid.UUID | None
    new: bool = False

    def answer(self) -> dict[str, Any]:
        return {"status": self.status, "content_id": str(self.content_id), "user_item_id": str(self.item_id),
                "folder_id": str(self.folder_id) if self.folder_id else None}


def item_status(kind: str, status: str, transcription_status: str) -> str:
    """The status an ingest answers for an item: transcribing while its transcript is pending (or failed)."""
    if kind in MEDIA_KINDS and transcription_status in ("pending", "failed"):
        return "transcribing"
    return "ready" if status == "ready" else "processing"


async def share_existing(s: AsyncSession, principal: Principal, canonical: str, url: str, title: str | None, *,
                         in_kb: bool, auto_transform: bool) -> Stored | None:
    """A new item on the content someone already stored for this URL (no second fetch, download or charge).

    None when there is none, or when it failed (it then gives up the URL for a fresh attempt).
    """
    folder_id = principal.new_item_folder  # locked before the content: folders come first in every writer
    if folder_id is not None and not await content_store.lock_folder(s, principal.user_id, folder_id):
        raise not_found()
    row = await content_store.by_canonical_url(s, canonical)
    if row is None:
        return None
    if row["status"] == "failed":
        await content_store.update_content(s, row["id"], canonical_url=None)
        return None
    media = row["kind"] in MEDIA_KINDS
    tstatus = ("done" if row["status"] == "ready" else "pending") if media else "not_required"
    item_id = await _new_item(
        s, user_id=principal.user_id, content_id=row["id"], kind=row["kind"], title=title or row["title"], url=url,
        in_kb=in_kb, auto_transform=auto_transform, status=row["status"], transcription_status=tstatus,
        folder_id=principal.new_item_folder, created_by=principal.token_id,
    )
    return Stored(item_status(row["kind"], row["status"], tstatus), row["id"], item_id, principal.new_item_folder)


async def _new_item(s: AsyncSession, **values: Any) -> uuid.UUID:
    item_id = await content_store.create_item(s, **values)
    if item_id is None:  # the token's folder was deleted while the request ran
        raise not_found()
    return item_id


async def finalized(s: AsyncSession, principal: Principal, row: dict[str, Any] | None) -> Stored | None:
    """The earlier answer of a finalize retried for the same upload (None when there is none)."""
    if row is None or row["item_id"] is None or row["user_id"] != principal.user_id:
        return None
    item = await upload_store.item_state(s, row["item_id"])
    if item is None:
        return None
    folder = await upload_store.first_folder(s, item["id"])
    return Stored(item_status(item["kind"], item["status"], item["transcription_status"]), item["content_id"],
                  item["id"], folder)


async def store_item(
    principal: Principal, source: Source, *, kind: str, title: str | None, text: str | None,
    metadata: dict[str, Any], status: str, chunks: Chunks, in_kb: bool, auto_transform: bool,
    transcription_status: str = "not_required", duration: float | None = None, transcript: str | None = None,
    quota_seconds: float | None = None,
) -> Stored:
    """Insert the content, its chunks and the user item in one transaction (idempotent per upload path), then
    queue the transforms of a ready item."""
    folder_id = principal.new_item_folder
    async with transaction() as s:
        if source.upload:
            assert source.path is not None
            row = await upload_store.get(s, source.path, for_update=True)
            if row is None:
                raise object_missing()
            earlier = await finalized(s, principal, row)
            if earlier is not None:  # a concurrent finalize won
                return earlier
        if quota_seconds is not None:
            await quota.reserve(s, principal.user_id, principal.tier, quota_seconds)
        values: dict[str, Any] = {
            "kind": kind, "title": title, "text": text, "url": source.url, "metadata": metadata, "status": status,
            "mime": source.mime, "object_path": source.path, "size_bytes": source.size, "duration_sec": duration,
            "transcript": transcript}
        content_id = await content_store.create(s, canonical_url=source.canonical, **values)
        if content_id is None and source.path is None:  # the same page was stored meanwhile: share it
            assert source.canonical is not None and source.url is not None
            shared = await share_existing(s, principal, source.canonical, source.url, title, in_kb=in_kb,
                                          auto_transform=auto_transform)
            assert shared is not None
            return shared
        if content_id is None:  # the same URL was stored meanwhile, but this object is ours: keep it unshared
            content_id = await content_store.create(s, canonical_url=None, **values)
            assert content_id is not None
        item_id = await _new_item(
            s, user_id=principal.user_id, content_id=content_id, kind=kind, title=title, url=source.url,
            in_kb=in_kb, auto_transform=auto_transform, status=status, transcription_status=transcription_status,
            folder_id=folder_id, created_by=principal.token_id,
        )
        if source.upload:
            assert source.path is not None
            await upload_store.set_item(s, source.path, item_id)
        todo = await index_content(s, content_id, title, chunks) if status == "ready" else []
    await queue_transforms(todo)
    return Stored(item_status(kind, status, transcription_status), content_id, item_id, folder_id, new=True)


async def index_content(s: AsyncSession, content_id: uuid.UUID, title: str | None, chunks: Chunks, *,
                        content_values: dict[str, Any] | None = None,
                        item_values: dict[str, Any] | None = None) -> list[uuid.UUID]:
    """Store a content's chunks and vectors and mark it and its items ready; returns the items whose transform
    is to be queued once the transaction commits.

    The chunks go in last: their trigger locks the BM25 statistics row, which every writer takes last
    (store/contents.py `lock_with_items`), so no transaction waits for a row while it holds that one."""
    await content_store.set_items_status(s, content_id, status="ready", error=None, **(item_values or {}))
    await content_store.update_content(s, content_id, status="ready", error=None, **(content_values or {}))
    await content_store.add_chunks(s, content_id, title, chunks.bodies, chunks.vectors, chunks.times)
    return await content_store.auto_transform_items(s, content_id)


async def finish_content(content_id: uuid.UUID, title: str | None, body: str, *,
                         content_values: dict[str, Any] | None = None, item_values: dict[str, Any] | None = None,
                         charge: tuple[uuid.UUID, float] | None = None,
                         segments: list[dict[str, Any]] | None = None) -> int:
    """The job path: chunk, embed and store `body` of a queued content, mark it ready, charge the transcription
    and queue transforms, reporting progress (`lev.ingest.progress`). With timed `segments` (a transcript) the chunks
    are cut from them and keep their seconds. Returns the chunk count (0 when the content was deleted
    meanwhile)."""
    await progress.report(content_id, "chunking", 0, None)
    chunks = Chunks()
    if segments:
        chunks.bodies, times = await asyncio.to_thread(timed_chunks, segments, title)
        chunks.times = times if chunks.bodies else None
    if not chunks.bodies:
        chunks = Chunks(await asyncio.to_thread(chunk_text, body, title) if body.strip() else [])
    bodies = chunks.bodies
    for start in range(0, len(bodies), EMBED_BATCH):  # batches, so GET /items/{id} can show how far it is
        await progress.report(content_id, "embedding", start, len(bodies))
        chunks.vectors += await embed_chunks(runtime.embedder(), title, bodies[start:start + EMBED_BATCH])
    await progress.report(content_id, "storing", len(bodies), len(bodies))
    async with transaction() as s:
        if not await content_store.lock_unfinished(s, content_id):
            return 0  # deleted while we worked, or finished by another run of this job (no second chunks or charge)
        todo = await index_content(s, content_id, title, chunks, content_values=content_values,
                                   item_values=item_values)
        if charge is not None:
            await quota.charge(s, charge[0], charge[1])
    await progress.clear(content_id)
    await queue_transforms(todo)
    return len(chunks.bodies)


async def store_failed(principal: Principal, *, kind: str, url: str, title: str | None, error: str,
                       in_kb: bool) -> uuid.UUID:
    """A link that could not be ingested, kept as a failed item with the reason (imports: a dead link is an item
    that says why, not a lost line). Its content is never shared, so a later ingest of the URL fetches afresh."""
    async with transaction() as s:
        content_id = await content_store.create(s, kind=kind, title=title, text=None, url=url, status="failed")
        assert content_id is not None
        await content_store.update_content(s, content_id, error=error[:1000])
        item_id = await _new_item(s, user_id=principal.user_id, content_id=content_id, kind=kind, title=title or url,
                                  url=url, in_kb=in_kb, auto_transform=False, status="failed",
                                  folder_id=principal.new_item_folder, created_by=principal.token_id)
        await content_store.set_items_status(s, content_id, error=error[:1000])
    return item_id


async def fail_content(content_id: uuid.UUID, message: str, *, transcription: bool) -> None:
    """Mark a queued content and its items failed with a message the user sees."""
    values: dict[str, Any] = {"status": "failed", "error": message[:1000]}
    async with transaction() as s:
        if await content_store.lock_with_items(s, content_id) is None:
            return  # deleted meanwhile
        await content_store.update_content(s, content_id, **values)
        if transcription:
            values["transcription_status"] = "failed"
        await content_store.set_items_status(s, content_id, **values)


async def queue_transforms(item_ids: list[uuid.UUID]) -> None:
    for item_id in item_ids:
        await runtime.enqueue("transform_item", str(item_id))


async def queue_after_share(stored: Stored, auto_transform: bool) -> None:
    """A new item on someone's ready content gets its own transform; a pending one is handled by that job."""
    if stored.status == "ready" and auto_transform:
        await queue_transforms([stored.item_id])
