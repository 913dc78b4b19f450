"""arq worker settings: the job functions, cron jobs, and how `lev worker` / `lev serve` run them."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from arq import cron
from arq.connections import RedisSettings
from arq.worker import Worker

from lev import clock, runtime
from lev.settings import get_settings

log = logging.getLogger("lev.worker")

QUEUE = "lev:queue"


async def purge_activity(_ctx: dict[str, Any]) -> int:
    """Delete activity entries older than the retention setting (90 days by default) and expired sessions."""
    from store import activity, sessions
    from store.db import session_scope

    cutoff = clock.now() - timedelta(days=get_settings().activity_retention_days)
    async with session_scope() as s:
        n = await activity.purge_before(s, cutoff)
        ended = await sessions.purge_expired(s)
    log.info("purged %d activity entries older than %s and %d expired sessions", n, cutoff.isoformat(), ended)
    return n


def job_functions() -> list[Any]:
    from tasks import jobs

    return [purge_activity, *jobs.FUNCTIONS]


def cron_jobs() -> list[Any]:
    from tasks import jobs

    purge = cron(purge_activity, hour={3}, minute={17}, run_at_startup=False)  # type: ignore[arg-type]
    return [purge, *jobs.CRONS]


async def _startup(ctx: dict[str, Any]) -> None:
    ctx["runtime"] = await runtime.start(get_settings())


async def _shutdown(_ctx: dict[str, Any]) -> None:
    await runtime.stop()


def make_worker(redis_url: str, *, own_runtime: bool) -> Worker:
    return Worker(
        functions=job_functions(),
        cron_jobs=cron_jobs(),
        redis_settings=RedisSettings.from_dsn(redis_url),
        queue_name=QUEUE,
        on_startup=_startup if own_runtime else None,
        on_shutdown=_shutdown if own_runtime else None,  # type: ignore[arg-type]
        handle_signals=own_runtime,
        max_jobs=4,
        job_timeout=3600,
        keep_result=3600,
    )


def run_worker() -> None:
    """`lev worker`: a standalone worker process against the configured (or embedded) stack."""
    from lev.embedded import resolve_urls

    settings = get_settings()
    _, redis_url = resolve_urls(settings.database_url, settings.redis_url, settings.data_dir)
    asyncio.run(make_worker(redis_url, own_runtime=True).async_run())
