"""arq worker settings: the job functions and cron jobs, the clients every job shares (in ctx), and how
`lev worker` (standalone) and `lev serve` (inline) run them."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from arq import cron
from arq.connections import RedisSettings
from arq.worker import Worker, func
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from lev import runtime
from lev.core.settings import get_settings
from lev.embedded import resolve_urls
from lev.ops import logs, metrics
from lev.plumbing import offload
from lev.runtime import QUEUE
from lev.supervisor import ShutdownWatchdog
from lev.tasks import fairshare
from lev.tasks.archives import archive_page
from lev.tasks.feeds import poll_feed, schedule_feeds
from lev.tasks.housekeeping import (
    drain_object_deletions,
    expire_uploads,
    locate_pdf_pages,
    purge_activity,
    reconcile_unfinished,
)
from lev.tasks.imports import run_import
from lev.tasks.jobs import process_content, transform_item
from lev.tasks.liveness import heartbeat, instrumented
from lev.tasks.media import extract_document, transcribe_content
from lev.tasks.webhooks import purge_webhook_events, start_sender, stop_sender
from lev.transforms.service import transformer_from

JOB_TIMEOUT_SEC = 3600
REDIS_RETRY_SEC = 1.0
FINISH_WAIT_SEC = 60.0  # how long a finished job waits for Redis to take its result
CLOSE_SEC = 2.0
log = logs.get_logger("lev.worker")
JOBS = (process_content, transform_item, extract_document, transcribe_content, run_import, drain_object_deletions,
        expire_uploads, reconcile_unfinished, purge_activity, poll_feed, schedule_feeds, purge_webhook_events,
        locate_pdf_pages, archive_page)
CRONS = (
    cron(drain_object_deletions, minute=set(range(60)), second={30}, run_at_startup=True),  # type: ignore[arg-type]
    cron(expire_uploads, minute={7, 37}, run_at_startup=False),  # type: ignore[arg-type]
    cron(reconcile_unfinished, minute=set(range(60)), second={15}, run_at_startup=True,  # type: ignore[arg-type]
         unique=True),
    cron(purge_activity, hour={3}, minute={17}, run_at_startup=False),  # type: ignore[arg-type]
    cron(schedule_feeds, minute=set(range(60)), second={5}, run_at_startup=True, unique=True),  # type: ignore[arg-type]
    cron(purge_webhook_events, minute={23}, run_at_startup=False, unique=True),  # type: ignore[arg-type]
    cron(locate_pdf_pages, minute=set(range(0, 60, 10)), second={45}, run_at_startup=True,  # type: ignore[arg-type]
         unique=True),
)


def job_functions() -> list[Any]:
    """Every job as the worker runs it: instrumented (claims, metrics, logs) and bounded in tries."""
    # arq gives up one try after ours, so our wrapper sees the last try and marks the item failed
    tries = get_settings().job_max_tries + 1
    return [func(instrumented(f), name=f.__name__, max_tries=tries) for f in JOBS]  # type: ignore[arg-type]


def cron_jobs() -> list[Any]:
    return [replace(c, coroutine=instrumented(c.coroutine)) for c in CRONS]  # type: ignore[arg-type]


async def open_clients(ctx: dict[str, Any]) -> None:
    """What jobs share, from the process's runtime: `deps` (settings, database, queue, object store, embedder,
    transcriber), the transformer; the heartbeat that lets other workers rescue this one's jobs if it dies; and the
    webhook outbox's sender."""
    deps = runtime.deps()
    ctx["deps"] = deps
    ctx["settings"] = deps.settings
    ctx["transformer"] = transformer_from(deps.settings, deps.embedder)
    stop = asyncio.Event()
    ctx["heartbeat_stop"] = stop
    ctx["heartbeat"] = asyncio.get_running_loop().create_task(
        heartbeat(ctx["redis"], stop, deps.settings.worker_heartbeat_sec))
    ctx["claim_ttl"] = JOB_TIMEOUT_SEC + 100
    start_sender(ctx, deps)


async def close_clients(ctx: dict[str, Any]) -> None:
    if "deps" in ctx:
        await stop_sender(ctx, runtime.shutdown_budget(ctx["deps"].settings.shutdown_grace_sec))
    if "heartbeat_stop" in ctx:
        ctx["heartbeat_stop"].set()
        await ctx["heartbeat"]


async def startup(ctx: dict[str, Any]) -> None:
    """A standalone worker opens the process's runtime first (the model is loaded and its size checked; its
    batches are computed in this process, which runs niced as a whole)."""
    ctx["runtime"] = await runtime.start(get_settings())
    await open_clients(ctx)


async def shutdown(ctx: dict[str, Any]) -> None:
    await close_clients(ctx)
    await runtime.stop()
    metrics.mark_process_dead()


class WorkerSettings:
    """The worker as arq sees it (`arq lev.tasks.worker.WorkerSettings` with LEV_REDIS_URL set runs what `lev worker`
    runs)."""

    functions = job_functions()
    cron_jobs = cron_jobs()
    queue_name = QUEUE
    on_startup = startup
    on_shutdown = shutdown
    max_jobs = fairshare.WORKER_SLOTS
    job_timeout = JOB_TIMEOUT_SEC
    keep_result = 3600


class LevWorker(Worker):
    """arq's worker, except that it waits for Redis when Redis cannot be reached (restarting, failing over)
    instead of exiting: its running jobs go on, a job that ends meanwhile has its result written once Redis answers
    (not lost with its in-progress mark left for an hour), and it takes jobs again. A stopping process takes none."""

    redis_down = False
    grace_sec = 30.0

    def handle_sig_wait_for_completion(self, signum: Any) -> None:
        """`lev worker` on SIGTERM/SIGINT: running jobs get the grace period less the reserve for closing, and the
        process is gone by the grace period whatever still runs then (an embedding batch is abandoned; its durable
        job runs again on the next start)."""
        if not runtime.stopping():
            runtime.begin_shutdown(self.grace_sec)
            self._job_completion_wait = int(runtime.shutdown_budget(self.grace_sec))
            ShutdownWatchdog(self.grace_sec, on_overrun=offload.shutdown).arm()
        super().handle_sig_wait_for_completion(signum)

    def handle_sig(self, signum: Any) -> None:
        """arq closes an inline worker as if on SIGUSR1 and logs that: log the signal the process got instead."""
        got = runtime.stop_signal()
        super().handle_sig(signal.Signals(got) if signum == signal.SIGUSR1 and got else signum)

    async def finish_job(self, *args: Any, **kwargs: Any) -> None:
        await self._once_redis_answers(lambda: Worker.finish_job(self, *args, **kwargs))

    async def finish_failed_job(self, *args: Any, **kwargs: Any) -> None:
        await self._once_redis_answers(lambda: Worker.finish_failed_job(self, *args, **kwargs))

    async def _once_redis_answers(self, write: Callable[[], Awaitable[None]]) -> None:
        deadline = time.monotonic() + FINISH_WAIT_SEC
        while True:
            try:
                await write()
                return
            except (RedisConnectionError, RedisTimeoutError, OSError):
                if time.monotonic() > deadline or runtime.stopping():
                    raise
                await asyncio.sleep(REDIS_RETRY_SEC)

    async def _poll_iteration(self) -> None:
        if runtime.stopping():
            self.allow_pick_jobs = False
        try:
            await super()._poll_iteration()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            if not self.redis_down:
                log.warning("Redis unavailable; the worker waits for it", error=type(exc).__name__)
            self.redis_down = True
            await asyncio.sleep(REDIS_RETRY_SEC)
            return
        if self.redis_down:
            log.warning("Redis is back; the worker takes jobs again")
            self.redis_down = False


def make_worker(redis_url: str, *, own_runtime: bool) -> Worker:
    """A worker on `redis_url`; inline in `lev serve` (own_runtime False) it shares the server's runtime."""
    worker = LevWorker(
        functions=job_functions(),
        cron_jobs=cron_jobs(),
        redis_settings=RedisSettings.from_dsn(redis_url),
        queue_name=WorkerSettings.queue_name,
        on_startup=startup if own_runtime else open_clients,
        on_shutdown=shutdown if own_runtime else close_clients,  # type: ignore[arg-type]
        handle_signals=own_runtime,
        # SIGTERM: stop taking jobs, let the running ones finish for up to the grace period, re-queue the rest
        job_completion_wait=int(get_settings().shutdown_grace_sec) if own_runtime else 0,
        max_jobs=WorkerSettings.max_jobs,
        job_timeout=WorkerSettings.job_timeout,
        keep_result=WorkerSettings.keep_result,
    )
    worker.grace_sec = float(get_settings().shutdown_grace_sec)
    return worker


async def stop_gracefully(worker: Worker, grace_sec: float) -> None:
    """The inline worker's shutdown: take no new job, give running ones `grace_sec`, then cancel (re-queue) them and
    close, within CLOSE_SEC even when Redis is gone."""
    worker.allow_pick_jobs = False
    running = [t for t in worker.tasks.values() if not t.done()]
    running.append(asyncio.get_running_loop().create_task(stop_sender(worker.ctx, grace_sec)))
    await asyncio.wait(running, timeout=grace_sec)
    try:
        await asyncio.wait_for(worker.close(), runtime.closing_time(CLOSE_SEC))
    except Exception as exc:  # Redis down: arq's close stops at its first Redis call, before on_shutdown
        log.warning("the worker did not close cleanly", error=type(exc).__name__)
        try:
            await asyncio.wait_for(close_clients(worker.ctx), runtime.closing_time(CLOSE_SEC))
        except Exception:
            log.warning("the worker's heartbeat did not stop cleanly")


def run_worker() -> None:
    """`lev worker`: a standalone worker process against the configured (or embedded) stack."""
    settings = get_settings()
    _, redis_url = resolve_urls(settings.database_url, settings.redis_url, settings.data_dir)
    if settings.ingest_embed_nice > 0:
        os.nice(settings.ingest_embed_nice)  # background work: API processes on this machine keep the CPU first

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
