"""The schedule's checks of due feeds, in batches: one statement takes a batch of due feeds (`store.feeds.claim_due`,
with a lease, so checkers on several workers share them), their conditional GETs run concurrently through the one
shared guarded client, and the checks that found nothing new (304, or the same body as last time) are recorded in
one statement for the batch. A feed with something new, or whose check failed, is recorded on its own as a poll
would (`lev.feeds.poll`: its entries recorded in the check's transaction, `feed.failing` after three failures), and
a poll job is queued to ingest what it found.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from lev.core.errors import ApiError, infrastructure_error
from lev.feeds import parse
from lev.feeds.poll import POLL_JOB, lock_key, next_poll, poll_job_id, read_changed, record_check, unchanged
from lev.net import share
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.plumbing.jobs import requeue
from lev.store import feeds as feed_store

BATCH = 100  # feeds taken by one statement, and recorded by one when nothing changed
AT_ONCE = 8  # checks in flight at once: enough for hundreds a second, few enough that a search shares the loop
LEASE_SEC = 600.0  # a taken feed is not due again for this long (a checker that died frees it then)

log = logs.get_logger("lev.feeds")

Unchanged = tuple[Any, datetime, str | None, str | None]


async def check_due(deps: Deps) -> int:
    """Check every due feed, a batch at a time, until none is due; how many were checked."""
    checked = 0
    slots = asyncio.Semaphore(AT_ONCE)
    while True:
        async with deps.db.statement() as s:
            batch = await feed_store.claim_due(s, BATCH, LEASE_SEC)
        if not batch:
            return checked
        quiet: list[Unchanged] = []
        await asyncio.gather(*(_check(deps, feed, slots, quiet) for feed in batch))
        async with deps.db.transaction() as s:
            await feed_store.checked_unchanged(s, quiet)
        checked += len(batch)


async def _check(deps: Deps, feed: dict[str, Any], slots: asyncio.Semaphore, quiet: list[Unchanged]) -> None:
    async with slots:
        try:
            with share.on_behalf_of(feed["user_id"]):  # its user's share of the outbound fetches
                fetched = await parse.fetch(deps.outbound, feed["url"], feed["etag"], feed["last_modified"])
        except Exception as exc:
            if infrastructure_error(exc) is not None:
                raise
            why = exc.message or exc.code if isinstance(exc, ApiError) else f"unexpected error: {type(exc).__name__}"
            await record_check(deps, feed, None, {}, why)
            return
    if unchanged(feed, fetched):
        quiet.append((feed["id"], next_poll(deps.settings, 0), fetched.etag, fetched.last_modified))
        return
    async with deps.db.try_advisory_lock(lock_key(feed["id"])) as held:
        if not held:
            # its poll job holds it, and may have read it after this claim (then it saw the lease, not a due feed,
            # and checked nothing): the lease is given back, so the feed stays due for the next round
            async with deps.db.transaction() as s:
                await feed_store.release_claim(s, feed["id"], feed["next_poll_at"])
            return
        parsed, values, error = await read_changed(feed, fetched)
        try:
            pending = await record_check(deps, feed, parsed, values, error)
        except Exception as exc:
            if infrastructure_error(exc) is not None:
                raise
            log.exception("recording a feed check failed", feed_id=str(feed["id"]))
            await record_check(deps, feed, None, {}, f"the feed's entries could not be recorded "
                                                     f"({type(exc).__name__}); it is checked again later")
            return
    if pending:
        await requeue(deps.queue, POLL_JOB, str(feed["id"]), job_id=poll_job_id(feed["id"]))
