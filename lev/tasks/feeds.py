"""Feed jobs: the schedule (a cron that checks every due feed in batches, lev.feeds.schedule, and queues the poll of
every feed holding pending entries) and one feed's poll (lev.feeds.poll)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from lev.feeds.poll import POLL_JOB, poll, poll_job_id
from lev.feeds.schedule import check_due
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.plumbing.jobs import requeue
from lev.store import feeds as feed_store

log = logs.get_logger("lev.worker")

POLL_BOUND_SEC = 3000.0  # a check and up to LEV_FEED_MAX_ENTRIES entries; the rest wait for the next run


async def poll_feed(ctx: dict[str, Any], feed_id: str) -> int:
    """Check one feed if it is due and ingest its pending entries; the items it brought."""
    async with asyncio.timeout(POLL_BOUND_SEC):
        return await poll(ctx["deps"], uuid.UUID(feed_id))


async def schedule_feeds(ctx: dict[str, Any]) -> int:
    """Check every due feed; queue a poll of each feed holding pending entries whose job was lost. Returns how many
    feeds were checked or queued (0: the tick did nothing)."""
    deps: Deps = ctx["deps"]
    checked = await check_due(deps)
    async with deps.db.read_session() as s:
        waiting = await feed_store.with_pending(s)
    queued = 0
    for feed_id in waiting:
        if await requeue(deps.queue, POLL_JOB, str(feed_id), job_id=poll_job_id(feed_id)):
            queued += 1
    if queued:
        log.info("queued feed polls", polls=queued)
    return checked + queued
