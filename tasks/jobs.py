"""Job functions run by the worker: embedding of queued content and AI transforms."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import asdict
from typing import Any

from sqlalchemy import select

from lev import progress
from lev.chunking import chunk_text, embed_chunks
from lev.media_ingest import drain_object_deletions as drain
from lev.media_ingest import expire_uploads as expire
from lev.media_ingest import run_extract_document, run_transcription
from lev.runtime import enqueue
from lev.transform import get_transformer
from store import contents as content_store
from store.db import session_scope
from store.models import contents, user_items

log = logging.getLogger("lev.jobs")

EMBED_BATCH = 64  # chunks embedded between two progress reports


async def process_content(_ctx: dict[str, Any], content_id: str) -> int:
    """Chunk and embed a stored content record, then mark it and its items ready."""
    cid = uuid.UUID(content_id)
    async with session_scope() as s:
        row = (await s.execute(select(contents.c.title, contents.c.text, contents.c.transcript)
                               .where(contents.c.id == cid))).first()
    if row is None:
        return 0
    body = row.transcript or row.text or ""
    await progress.report(cid, "chunking", 0, None)
    bodies = await asyncio.to_thread(chunk_text, body, row.title)
    vectors: list[list[float]] = []
    for start in range(0, len(bodies), EMBED_BATCH):  # batches, so GET /items/{id} can show how far it is
        await progress.report(cid, "embedding", start, len(bodies))
        vectors += await embed_chunks(row.title, bodies[start:start + EMBED_BATCH])
    await progress.report(cid, "storing", len(bodies), len(bodies))
    async with session_scope() as s:
        await content_store.add_chunks(s, cid, row.title, bodies, vectors)
        await content_store.update_content(s, cid, status="ready")
        await content_store.set_items_status(s, cid, status="ready")
        todo = list((await s.execute(select(user_items.c.id).where(
            user_items.c.content_id == cid, user_items.c.auto_transform.is_(True)))).scalars())
    await progress.clear(cid)
    for item_id in todo:
        await enqueue("transform_item", str(item_id))
    return len(bodies)


async def transform_item(_ctx: dict[str, Any], item_id: str) -> int:
    """Run the configured Transformer over an item's text and store its outputs."""
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
        await content_store.add_outputs(s, iid, [asdict(o) for o in produced])
    return len(produced)


async def extract_document(_ctx: dict[str, Any], content_id: str) -> int:
    """Extract (OCR) and embed a queued PDF or image upload (lev.media_ingest)."""
    return await run_extract_document(content_id)


async def transcribe_content(_ctx: dict[str, Any], content_id: str, user_id: str) -> int:
    """Transcribe queued audio, video or YouTube content and charge the user's quota (lev.media_ingest)."""
    return await run_transcription(content_id, user_id)


async def drain_object_deletions(_ctx: dict[str, Any]) -> int:
    """Delete stored objects queued by item deletes and expired uploads; retried every minute until gone."""
    return await drain()


async def expire_uploads(_ctx: dict[str, Any]) -> int:
    """Forget uploads never finalized within 24 h and delete their objects."""
    return await expire()


def _crons() -> list[Any]:
    from arq import cron

    return [
        cron(drain_object_deletions, minute=set(range(60)), second={30},  # type: ignore[arg-type]
             run_at_startup=True),
        cron(expire_uploads, minute={7, 37}, run_at_startup=False),  # type: ignore[arg-type]
    ]


FUNCTIONS: list[Any] = [process_content, transform_item, extract_document, transcribe_content,
                        drain_object_deletions, expire_uploads]
CRONS: list[Any] = _crons()
