"""Jobs that finish ingest: embedding of queued content and AI transforms ("outputs") of items."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import asdict
from typing import Any

from lev.ingest.finish import finish_content
from lev.plumbing.deps import Deps
from lev.store import contents as content_store
from lev.store import lifecycle
from lev.store.db import Database
from lev.store.locations import Outline


def work_bound(*, chars: int = 0, size_bytes: int = 0, media_sec: float = 0.0) -> float:
    """How long one run of a job may take, from the size of its work (a stuck run fails and is retried or given
    up instead of holding the work for arq's flat job timeout)."""
    seconds = 120 + chars / 1000 + size_bytes / (1 << 20) * 30 + media_sec * 3
    return min(seconds, 3500.0)


async def process_content(ctx: dict[str, Any], content_id: str) -> int:
    """Chunk and embed a stored content record, then mark it and its items ready."""
    deps: Deps = ctx["deps"]
    cid = uuid.UUID(content_id)
    async with deps.db.read_session() as s:
        row = await content_store.get_content(s, cid)
    if row is None or row["status"] != lifecycle.Status.PROCESSING:
        return 0  # deleted, or finished by an earlier run of this job
    body = row["transcript"] or row["text"] or ""
    async with asyncio.timeout(work_bound(chars=len(body))):
        return await finish_content(deps, cid, row["title"], body, field="transcript" if row["transcript"] else "text",
                                    outline=Outline.from_json(row["outline"]))


async def transform_item(ctx: dict[str, Any], item_id: str) -> int:
    """Run the configured Transformer over an item's text and store its outputs."""
    iid = uuid.UUID(item_id)
    db: Database = ctx["deps"].db
    async with db.read_session() as s:
        item = await content_store.item_for_transform(s, iid)
    if item is None:
        return 0
    text = item["transcript"] or item["text"] or ""
    produced = await ctx["transformer"].transform(item["title"], text) if text.strip() else []
    async with db.transaction() as s:
        if await content_store.item_for_transform(s, iid, lock=True) is None:
            return 0
        if await content_store.has_outputs(s, iid):
            return 0  # an earlier run of this job stored them
        await content_store.add_outputs(s, iid, [asdict(o) for o in produced])
        await content_store.mark_transformed(s, iid)  # outputs or none: done, not to be queued again
    return len(produced)
