"""A fair share of the worker slots per user: at most LEV_JOBS_PER_USER of one user's jobs run at once, across
every worker. A job past its user's share does not wait in a slot: it goes back to the queue for a moment (without
costing one of its tries), so another user's job takes the slot now.

The last of a worker's WORKER_SLOTS is kept for users who have no job running anywhere: however many users fill
their shares, a newcomer's job starts at once.

The running jobs of a user are a Redis sorted set of job ids scored by when their lease ends; a running job
renews its lease, so the share of a worker killed mid-job comes back within LEASE_SEC."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from arq.worker import Retry

from lev.embedding import pool as embedding_turns
from lev.plumbing.deps import Deps
from lev.store import owners
from lev.store.owners import Subject

WORKER_SLOTS = 4  # jobs one worker runs at once (arq's max_jobs)
KEY = "lev:fair:"
LEASE_SEC = 60.0
DEFER_SEC = 2.0
RETRY_KEY = "arq:retry:"
SUBJECTS: dict[str, Subject] = {"process_content": "content", "extract_document": "content",
                                "transcribe_content": "content", "transform_item": "item", "run_import": "import",
                                "poll_feed": "feed", "archive_page": "content"}

_here = [0]  # this process's jobs running in a share

# take a place among the user's running jobs (ARGV: job id, now, lease end, share): 1 taken, 0 full
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3]) - tonumber(ARGV[2])) + 60)
  return 1
end
return 0
"""


async def owner(deps: Deps, job: str, args: tuple[Any, ...]) -> uuid.UUID | None:
    """The user whose work the job is (None: a job of no user's, or its subject is gone)."""
    subject = SUBJECTS.get(job)
    if subject is None or not args:
        return None
    try:
        subject_id = uuid.UUID(str(args[0]))
    except ValueError:
        return None
    async with deps.db.read_session() as s:
        return await owners.owner_of(s, subject, subject_id)


@contextlib.asynccontextmanager
async def share(redis: Any, deps: Deps, job: str, job_id: str, args: tuple[Any, ...]) -> AsyncIterator[None]:
    """Run the body in its user's share, renewing the lease meanwhile; raise arq's Retry (the try handed back) when
    the user's share is full. Its embeddings wait for the requests' and take turns with other users' jobs'."""
    limit = deps.settings.jobs_per_user
    user = await owner(deps, job, args) if redis is not None and job_id else None
    with embedding_turns.turn(str(user) if user else f"{job}:{job_id}", later=True):
        if user is None or limit <= 0:
            yield
            return
        key = KEY + str(user)
        now = time.time()
        room = limit if _here[0] < WORKER_SLOTS - 1 else 1  # the last slot: only for a user with none running
        if not await redis.eval(_TAKE, 1, key, job_id, now, now + LEASE_SEC, room):
            await redis.decr(RETRY_KEY + job_id)  # waiting for a share is not a failed try
            raise Retry(defer=DEFER_SEC)
        renew = asyncio.get_running_loop().create_task(_renew(redis, key, job_id))
        _here[0] += 1
        try:
            yield
        finally:
            _here[0] -= 1
            renew.cancel()
            with contextlib.suppress(Exception):
                await redis.zrem(key, job_id)


async def _renew(redis: Any, key: str, job_id: str) -> None:
    while True:
        await asyncio.sleep(LEASE_SEC / 3)
        with contextlib.suppress(Exception):
            await redis.zadd(key, {job_id: time.time() + LEASE_SEC})
