"""The job path's end: a stored, unfinished content becomes ready (its text chunked, embedded and stored, its
transcription charged) or failed (with a reason the user sees), moving its items by the lifecycle's rules
(`store.lifecycle`). The request path's `save` and this module are the only writers of an item's state."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from lev.highlights import service as highlights
from lev.ingest import formats, progress
from lev.ingest.chunking import embed_chunks, timed_passages
from lev.ingest.followups import EMBED, EXTRACT, TRANSCRIBE, Followup, enqueue, finishing, transforms
from lev.ingest.plan import Chunks, cut_text
from lev.ingest.save import index_content
from lev.limits import quota
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.store import contents as content_store
from lev.store import items as item_store
from lev.store import lifecycle
from lev.store.locations import Outline
from lev.webhooks import events

log = logs.get_logger("lev.ingest")
EMBED_BATCH = 32  # chunks the worker embeds between two progress reports (and deletion checks): a request's
# own embedding waits behind at most one such batch on the ingest threads


async def finish_content(deps: Deps, content_id: uuid.UUID, title: str | None, body: str, *,
                         content_values: dict[str, Any] | None = None, charge: tuple[uuid.UUID, float] | None = None,
                         segments: list[dict[str, Any]] | None = None, field: str = "text",
                         outline: Outline | None = None, retitle: str | None = None) -> int:
    """Chunk, embed and store `body` of a queued content, mark it and its items ready, charge the transcription
    and queue transforms, reporting progress. With timed `segments` (a transcript) the chunks are cut from them
    and keep their seconds. The text the chunks were cut from is stored as the content's `field` (text or
    transcript) with its outline (`outline`: what the text alone does not say, a PDF's pages, a page's headings).
    `retitle`: the title the document itself gave, for the content and its items (stored under their file's name).
    Returns the chunk count (0 when the content was deleted or finished meanwhile)."""
    title = retitle or title
    await progress.report(deps.redis, content_id, "chunking", 0, None)
    chunks = Chunks()
    if segments:
        chunks = Chunks.of(await asyncio.to_thread(timed_passages, segments, title))
    if not chunks.bodies:
        chunks = await cut_text(body, title, deps.settings.max_chunks_per_item, outline=outline)
    content_values = {**(content_values or {}), field: chunks.text, "outline": chunks.outline.to_json(),
                      **({"title": retitle} if retitle else {})}
    bodies = chunks.bodies
    for start in range(0, len(bodies), EMBED_BATCH):  # batches, so GET /items/{id} can show how far it is
        if start and not await _still_wanted(deps, content_id):
            await progress.clear(deps.redis, content_id)
            log.info(f"embedding of content {content_id} stopped: it was deleted", embedded=start, chunks=len(bodies))
            return 0  # deleted (or finished elsewhere) meanwhile: stop within a batch of the DELETE
        await progress.report(deps.redis, content_id, "embedding", start, len(bodies))
        chunks.vectors += await embed_chunks(deps.embedder, title, bodies[start:start + EMBED_BATCH])
    await progress.report(deps.redis, content_id, "storing", len(bodies), len(bodies))
    async with deps.db.transaction() as s:
        row = await content_store.lock_with_items(s, content_id)
        if row is None or row["status"] != lifecycle.Status.PROCESSING:
            return 0  # deleted while we worked, or finished by another run of this job (no second chunks or charge)
        ready = lifecycle.advance(lifecycle.of_content(row["kind"], row["status"]), lifecycle.Event.FINISHED)
        if retitle:
            await item_store.set_items_of_content(s, content_id, title=retitle)
        await highlights.content_text_stored(s, content_id, chunks.text or "", title)
        todo = await index_content(s, content_id, title, chunks, ready, content_values=content_values)
        if charge is not None:
            await quota.charge(s, charge[0], charge[1])
    await progress.clear(deps.redis, content_id)
    await enqueue(deps.queue, transforms(todo))
    return len(chunks.bodies)


async def _still_wanted(deps: Deps, content_id: uuid.UUID) -> bool:
    async with deps.db.read_session() as s:
        return await content_store.status_of(s, content_id) == lifecycle.Status.PROCESSING


async def fail_content(deps: Deps, content_id: uuid.UUID, message: str) -> bool:
    """Mark a queued content and its items failed with a message the user sees; False when it is gone or no
    longer unfinished (another run of its job finished it)."""
    async with deps.db.transaction() as s:
        row = await content_store.lock_with_items(s, content_id)
        if row is None:
            return False  # deleted meanwhile
        state = lifecycle.of_content(row["kind"], row["status"])
        if not state.moving:
            return False
        failed = lifecycle.advance(state, lifecycle.Event.FAILED)
        await content_store.update_content(s, content_id, status=failed.status.value, error=message[:1000])
        await item_store.set_items_of_content(s, content_id, error=message[:1000], **failed.columns())
        await events.items_changed(s, "item.failed", content_id=content_id)
    return True


def to_finish(row: dict[str, Any]) -> Followup:
    """The job that finishes an unfinished content (`store.contents.unfinished`), decided from the content itself:
    the database is the record of unfinished work."""
    content_id, user_id = row["id"], row["pending_user"]
    if user_id is not None and not row["transcript"]:
        return finishing(TRANSCRIBE, content_id, user_id)[0]
    if row["kind"] in ("pdf", "image", *formats.KINDS) and row["object_path"] and not (row["text"] or "").strip():
        return finishing(EXTRACT, content_id, user_id)[0]
    return finishing(EMBED, content_id, user_id)[0]
