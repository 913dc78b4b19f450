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
from lev.embedded import resolve_urls
from lev.embedder import check_dimension, get_embedder
from lev.runtime import QUEUE
from lev.settings import get_settings
from store import activity
from store.db import session_scope
from tasks import jobs

log = logging.getLogger("lev.worker")

async def purge_activity(_ctx: dict[str, Any]) -> int:
    """Delete activity entries older than the retention setting (90 days by default)."""

    cutoff = clock.now() - timedelta(days=get_settings().activity_retention_days)
    async with session_scope() as s:
        n = await activity.purge_before(s, cutoff)
    log.info("purged %d activity entries older than %s", n, cutoff.isoformat())
    return n


def job_functions() -> list[Any]:
    return [purge_activity, *jobs.FUNCTIONS]


def cron_jobs() -> list[Any]:
    purge = cron(purge_activity, hour={3}, minute={17}, run_at_startup=False)  # type: ignore[arg-type]
    return [purge, *jobs.CRONS]


async def _startup(ctx: dict[str, Any]) -> None:
    settings = get_settings()
    await asyncio.to_thread(check_dimension, get_embedder(), settings.embed_dim)
    ctx["runtime"] = await runtime.start(settings)


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

    settings = get_settings()
    _, redis_url = resolve_urls(settings.database_url, settings.redis_url, settings.data_dir)
    asyncio.run(make_worker(redis_url, own_runtime=True).async_run())
