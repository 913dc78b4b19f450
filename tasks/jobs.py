"""Job functions run by the worker: embedding of queued content and AI transforms."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

log = logging.getLogger("lev.jobs")

RECONCILE_GRACE_SEC = 5  # work younger than this may still be between its commit and its enqueue
EMBED_BATCH = 64  # chunks embedded between two progress reports


async def process_content(_ctx: dict[str, Any], content_id: str) -> int:
    """Chunk and embed a stored content record, then mark it and its items ready."""
    from lev import progress
    from lev.chunking import chunk_text
    from lev.ingest import embed_chunks
    from lev.runtime import enqueue
    from store import contents as content_store
    from store.db import session_scope
    from store.models import contents, user_items

    cid = uuid.UUID(content_id)
    async with session_scope() as s:
        row = (await s.execute(select(contents.c.title, contents.c.text, contents.c.transcript, contents.c.status)
                               .where(contents.c.id == cid))).first()
    if row is None or row.status != "processing":
        return 0  # deleted, or finished by an earlier run of this job
    body = row.transcript or row.text or ""
    async with asyncio.timeout(work_bound(chars=len(body))):
        await progress.report(cid, "chunking", 0, None)
        bodies = await asyncio.to_thread(chunk_text, body, row.title)
        vectors: list[list[float]] = []
        for start in range(0, len(bodies), EMBED_BATCH):  # batches, so GET /items/{id} can show how far it is
            await progress.report(cid, "embedding", start, len(bodies))
            vectors += await embed_chunks(row.title, bodies[start:start + EMBED_BATCH])
        await progress.report(cid, "storing", len(bodies), len(bodies))
    async with session_scope() as s:
        if not await content_store.lock_unfinished(s, cid):
            return 0  # a concurrent run finished first: its chunks stand, ours are dropped
        await content_store.add_chunks(s, cid, row.title, bodies, vectors)
        await content_store.update_content(s, cid, status="ready")
        await content_store.set_items_status(s, cid, status="ready")
        todo = list((await s.execute(select(user_items.c.id).where(
            user_items.c.content_id == cid, user_items.c.auto_transform.is_(True)))).scalars())
    await progress.clear(cid)
    for item_id in todo:
        await enqueue("transform_item", str(item_id))
    return len(bodies)


def work_bound(*, chars: int = 0, size_bytes: int = 0, media_sec: float = 0.0) -> float:
    """How long one run of a job may take, from the size of its work (a stuck run fails and is retried or given
    up instead of holding the work for arq's flat job timeout)."""
    seconds = 120 + chars / 1000 + size_bytes / (1 << 20) * 30 + media_sec * 3
    return min(seconds, 3500.0)


async def transform_item(_ctx: dict[str, Any], item_id: str) -> int:
    """Run the configured Transformer over an item's text and store its outputs."""
    from lev.transform import get_transformer
    from store import contents as content_store
    from store.db import session_scope

    iid = uuid.UUID(item_id)
    async with session_scope() as s:
        item = await content_store.item_for_transform(s, iid)
    if item is None:
        return 0
    text = item["transcript"] or item["text"] or ""
    if not text.strip():
        return 0
    produced = await get_transformer().transform(item["title"], text)
    async with session_scope() as s:
        if await content_store.item_for_transform(s, iid, lock=True) is None:
            return 0
        if await content_store.has_outputs(s, iid):
            return 0  # an earlier run of this job stored them
        await content_store.add_outputs(s, iid, [asdict(o) for o in produced])
    return len(produced)


async def _size(content_id: str) -> dict[str, Any]:
    from store.db import session_scope
    from store.models import contents

    async with session_scope() as s:
        row = (await s.execute(select(contents.c.size_bytes, contents.c.duration_sec)
                               .where(contents.c.id == uuid.UUID(content_id)))).first()
    return {"size_bytes": int(row.size_bytes or 0), "media_sec": float(row.duration_sec or 0.0)} if row else {}


async def extract_document(_ctx: dict[str, Any], content_id: str) -> int:
    """Extract (OCR) and embed a queued PDF or image upload (lev.media_ingest)."""
    from lev.media_ingest import run_extract_document

    async with asyncio.timeout(work_bound(**await _size(content_id))):
        return await run_extract_document(content_id)


async def transcribe_content(_ctx: dict[str, Any], content_id: str, user_id: str) -> int:
    """Transcribe queued audio, video or YouTube content and charge the user's quota (lev.media_ingest)."""
    from lev.media_ingest import run_transcription

    async with asyncio.timeout(work_bound(**await _size(content_id))):
        return await run_transcription(content_id, user_id)


async def reconcile_unfinished(ctx: dict[str, Any]) -> int:
    """Re-queue the unfinished work whose job is gone (lost with Redis, or never queued because the process
    died between commit and enqueue): the database, not the queue, is the record of acknowledged work."""
    from lev.runtime import get_runtime, job_id
    from store import contents as content_store
    from store.db import session_scope

    async with session_scope() as s:
        work = await content_store.unfinished(s, datetime.now(UTC) - timedelta(seconds=RECONCILE_GRACE_SEC))
    redis = get_runtime().arq
    queued = 0
    for w in work:
        jid = job_id(w["job"], w["args"][0])
        if await redis.exists(f"arq:job:{jid}", f"arq:in-progress:{jid}"):
            continue
        await redis.delete(f"arq:result:{jid}", f"arq:retry:{jid}")  # a finished run of an earlier life
        if await redis.enqueue_job(w["job"], *w["args"], _job_id=jid) is not None:
            queued += 1
            log.warning("re-queued unfinished work: %s %s", w["job"], w["args"][0])
    return queued


async def drain_object_deletions(_ctx: dict[str, Any]) -> int:
    """Delete stored objects queued by item deletes and expired uploads; retried every minute until gone."""
    from lev.media_ingest import drain_object_deletions as drain

    return await drain()


async def expire_uploads(_ctx: dict[str, Any]) -> int:
    """Forget uploads never finalized within 24 h and delete their objects."""
    from lev.media_ingest import expire_uploads as expire

    return await expire()


def _crons() -> list[Any]:
    from arq import cron

    return [
        cron(drain_object_deletions, minute=set(range(60)), second={30},  # type: ignore[arg-type]
             run_at_startup=True),
        cron(expire_uploads, minute={7, 37}, run_at_startup=False),  # type: ignore[arg-type]
        cron(reconcile_unfinished, minute=set(range(60)), second={15},  # type: ignore[arg-type]
             run_at_startup=True, unique=True),
    ]


FUNCTIONS: list[Any] = [process_content, transform_item, extract_document, transcribe_content,
                        drain_object_deletions, expire_uploads, reconcile_unfinished]
CRONS: list[Any] = _crons()
