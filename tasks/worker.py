"""arq worker settings: the job functions, cron jobs, and how `lev worker` / `lev serve` run them."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import timedelta
from typing import Any

from arq import cron
from arq.connections import RedisSettings
from arq.worker import Worker, func

from lev import clock, metrics, runtime
from lev.embedded import resolve_urls
from lev.embedder import check_dimension, get_embedder
from lev.runtime import QUEUE
from lev.settings import get_settings
from store import activity
from store.db import session_scope
from tasks import jobs
from tasks.liveness import heartbeat, instrumented

log = logging.getLogger("lev.worker")

async def purge_activity(_ctx: dict[str, Any]) -> int:
    """Delete activity entries older than the retention setting (90 days by default)."""
    cutoff = clock.now() - timedelta(days=get_settings().activity_retention_days)
    async with session_scope() as s:
        n = await activity.purge_before(s, cutoff)
    log.info("purged %d activity entries older than %s", n, cutoff.isoformat())
    return n


JOB_TIMEOUT_SEC = 3600


def job_functions() -> list[Any]:
    # arq gives up one try after ours, so our wrapper sees the last try and marks the item failed
    tries = get_settings().job_max_tries + 1
    return [func(instrumented(f), name=f.__name__, max_tries=tries)  # type: ignore[arg-type]
            for f in (purge_activity, *jobs.FUNCTIONS)]


def cron_jobs() -> list[Any]:
    purge = cron(instrumented(purge_activity), hour={3}, minute={17}, run_at_startup=False)  # type: ignore[arg-type]
    return [purge, *(replace(c, coroutine=instrumented(c.coroutine)) for c in jobs.CRONS)]


async def _beat(ctx: dict[str, Any]) -> None:
    stop = asyncio.Event()
    ctx["heartbeat_stop"] = stop
    ctx["heartbeat"] = asyncio.get_running_loop().create_task(heartbeat(ctx["redis"], stop))
    ctx["claim_ttl"] = JOB_TIMEOUT_SEC + 100


async def _unbeat(ctx: dict[str, Any]) -> None:
    if "heartbeat_stop" in ctx:
        ctx["heartbeat_stop"].set()
        await ctx["heartbeat"]


async def _startup(ctx: dict[str, Any]) -> None:
    settings = get_settings()
    await asyncio.to_thread(check_dimension, get_embedder(), settings.embed_dim)
    ctx["runtime"] = await runtime.start(settings)
    await _beat(ctx)


async def _shutdown(ctx: dict[str, Any]) -> None:
    await _unbeat(ctx)
    await runtime.stop()
    metrics.mark_process_dead()


def make_worker(redis_url: str, *, own_runtime: bool) -> Worker:
    settings = get_settings()
    return Worker(
        functions=job_functions(),
        cron_jobs=cron_jobs(),
        redis_settings=RedisSettings.from_dsn(redis_url),
        queue_name=QUEUE,
        on_startup=_startup if own_runtime else _beat,
        on_shutdown=_shutdown if own_runtime else _unbeat,  # type: ignore[arg-type]
        handle_signals=own_runtime,
        # SIGTERM: stop taking jobs, let the running ones finish for up to the grace period, re-queue the rest
        job_completion_wait=int(settings.shutdown_grace_sec) if own_runtime else 0,
        max_jobs=4,
        job_timeout=JOB_TIMEOUT_SEC,
        keep_result=3600,
    )


async def stop_gracefully(worker: Worker, grace_sec: float) -> None:
    """The inline worker's shutdown: take no new job, give running ones `grace_sec`, then cancel (re-queue)."""
    worker.allow_pick_jobs = False
    running = [t for t in worker.tasks.values() if not t.done()]
    if running:
        await asyncio.wait(running, timeout=grace_sec)
    await worker.close()


def run_worker() -> None:
    """`lev worker`: a standalone worker process against the configured (or embedded) stack."""
    settings = get_settings()
    _, redis_url = resolve_urls(settings.database_url, settings.redis_url, settings.data_dir)

    async def run() -> None:
        # built inside the running loop: arq binds its signal handlers and tasks to the loop it finds
        worker = make_worker(redis_url, own_runtime=True)
        try:
            await worker.async_run()
        except asyncio.CancelledError:
            pass  # SIGTERM/SIGINT: arq cancels its main task once running jobs finished (or the grace ran out)
        finally:
            await worker.close()

    asyncio.run(run())
