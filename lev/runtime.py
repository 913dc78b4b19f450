"""Process-wide resources: database engine, Redis, job queue, limiter, activity writer, object store, and the
embedder with its query batcher (built here, once per process, and handed on in `Deps`)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from arq import create_pool
from arq.connections import RedisSettings
from redis.asyncio import Redis

from lev.auth import principal_cache as principals
from lev.core import steps
from lev.core.settings import Settings, get_settings
from lev.embedded import resolve_urls
from lev.embedding.embedder import build_embedder, check_dimension
from lev.embedding.pool import QueryBatcher
from lev.limits.ratelimit import Limiter
from lev.ops import logs
from lev.ops.activity import ActivityWriter
from lev.plumbing import offload
from lev.plumbing.deps import Deps
from lev.providers.mailer import mailer_from
from lev.providers.transcriber import transcriber_from
from lev.store import db
from lev.store.objects import LocalObjectStore, ObjectStore, S3ObjectStore, load_or_create_secret
from lev.webhooks import events as webhook_events


@dataclass
class Runtime:
    settings: Settings
    database_url: str
    redis_url: str
    redis: Any = None
    request_redis: Any = None  # the request path's (auth epoch, limits): bounded waits, so a hung Redis fails fast
    arq: Any = None
    limiter: Any = None
    activity: Any = None
    principals: Any = None
    deps: Deps | None = None
    warming: asyncio.Task[None] | None = None  # the document readers' children starting (offload.prepare)


_runtime: Runtime | None = None
_shutdown_deadline: float | None = None  # time.monotonic() by which a stopping process must be gone
_stop_signal: int | None = None
# of the grace period, kept for closing after requests and jobs: the clients, the embedding child, the servers
CLEANUP_SHARE, CLEANUP_MAX_SEC = 0.4, 3.0
# of that, kept to the end for the embedded servers' stop and the shutdown watchdog's own reserve: no closing step
# may run into it (`closing_time`)
SERVERS_STOP_SEC = 1.0

log = logs.get_logger("lev.runtime")
QUEUE = "lev:queue"  # the arq queue the API enqueues to and the worker reads
QUERY_THREADS = max(1, min(4, os.cpu_count() or 1))  # threads embedding search queries (each batch on one core)


@lru_cache(maxsize=1)
def get_object_store() -> ObjectStore:
    """The store chosen by `LEV_OBJECT_STORE` (tests call `get_object_store.cache_clear()` after changes)."""
    settings = get_settings()
    kind = settings.object_store.lower()
    if kind == "s3":
        if not settings.s3_bucket:
            raise RuntimeError("LEV_OBJECT_STORE=s3 needs LEV_S3_BUCKET")
        return S3ObjectStore(settings.s3_bucket, settings.s3_endpoint_url, settings.s3_region,
                             settings.s3_access_key, settings.s3_secret_key)
    if kind != "local":
        raise RuntimeError(f"LEV_OBJECT_STORE must be 'local' or 's3', not {settings.object_store!r}")
    data_dir = Path(settings.data_dir)
    return LocalObjectStore(data_dir / "objects", load_or_create_secret(data_dir, settings.upload_secret))


def deps() -> Deps:
    """What ingest, imports and jobs are handed: the process's settings, database, queue, stores and models."""
    rt = get_runtime()
    assert rt.deps is not None
    return rt.deps


def get_runtime() -> Runtime:
    if _runtime is None:
        raise RuntimeError("runtime not started")
    return _runtime


_prestarted: Future[tuple[str, str]] | None = None


def prestart_servers(settings: Settings) -> None:
    """Start (or join) the embedded PostgreSQL and Redis on a thread now, while the app is still being built (`lev
    serve`); `start` then waits for them instead of starting them."""
    global _prestarted
    if _prestarted is None:
        _prestarted = ThreadPoolExecutor(1, thread_name_prefix="lev-prestart").submit(_start_servers, settings)


def _start_servers(settings: Settings) -> tuple[str, str]:
    with steps.step("PostgreSQL and Redis", "starting PostgreSQL and Redis"
                    if settings.database_url is None else "connecting to the database and Redis"):
        return resolve_urls(settings.database_url, settings.redis_url, settings.data_dir)


async def _servers(settings: Settings) -> tuple[str, str]:
    global _prestarted
    if _prestarted is None:
        return await asyncio.to_thread(_start_servers, settings)
    started, _prestarted = _prestarted, None
    return await asyncio.wrap_future(started)


def _load_model(emb: Any) -> None:
    with steps.step("model", "loading the embedding model"):
        emb.start()


async def start(settings: Settings | None = None, *, migrate: bool = True, ingest_nice: int = 0) -> Runtime:
    """Open every shared resource (idempotent within a process). The embedder computes batches on threads at CPU
    niceness +`ingest_nice` (an API process; a standalone worker runs niced as a whole); its model loads while the
    embedded servers start, and its vector size is checked against the database column."""
    global _runtime
    if _runtime is not None:
        return _runtime
    settings = settings or get_settings()
    offload.configure(settings.cpu_processes, ingest_nice, settings.extract_memory_mb << 20)
    emb = build_embedder(settings, ingest_nice)
    try:
        loaded, urls = await asyncio.gather(asyncio.to_thread(_load_model, emb), _servers(settings),
                                            return_exceptions=True)
        if isinstance(loaded, BaseException):
            raise loaded
        if isinstance(urls, BaseException):
            raise urls
        db_url, redis_url = urls
        await asyncio.to_thread(check_dimension, emb)  # refuses to start on a vector-size mismatch
        if migrate:
            with steps.step("migrations", "checking the database's migrations"):
                newer = await asyncio.to_thread(db.migrate, db_url)
            if newer is not None:
                log.warning("the database is at a newer release's migration; running on it as it is",
                            database=newer, this_release=db.head_revision_cached())
    except BaseException:
        await asyncio.to_thread(emb.close)
        raise
    opened = db.init_engine(db_url, settings.db_pool_size, generic_plans=settings.db_generic_plans)
    redis = Redis.from_url(redis_url)
    rt = Runtime(settings=settings, database_url=db_url, redis_url=redis_url, redis=redis)
    rt.arq = await create_pool(RedisSettings.from_dsn(redis_url), default_queue_name=QUEUE)
    # every session of the process comes from this one: its transactions carry the Redis their after-commit
    # nudges (the webhook outbox's senders) go to
    database = opened.with_info(**{webhook_events.NUDGE_INFO: redis})
    rt.request_redis = Redis.from_url(redis_url, socket_connect_timeout=1, socket_timeout=2)
    rt.limiter = Limiter(settings, redis_url, rt.request_redis, database)
    rt.activity = ActivityWriter(database)
    rt.principals = principals.PrincipalCache(rt.request_redis, settings.principal_cache_sec)
    principals.install(rt.principals)
    rt.activity.start()
    rt.deps = Deps(settings=settings, db=database, queue=rt.arq, redis=redis, objects=get_object_store(),
                   embedder=emb, queries=QueryBatcher(emb.embed_queries, max(1, settings.query_batch_max),
                                                      QUERY_THREADS),
                   transcriber=transcriber_from(settings), mailer=mailer_from(settings))
    # the children that read uploaded documents start now, niced, not on the first upload (their imports take seconds)
    rt.warming = asyncio.create_task(offload.prepare("lev.ingest.formats"))
    _runtime = rt
    return rt


def begin_shutdown(grace_sec: float, signum: int | None = None) -> None:
    """The process was asked to stop (SIGTERM, SIGINT): it has `grace_sec` from now, in all."""
    global _shutdown_deadline, _stop_signal
    if _shutdown_deadline is None:
        _shutdown_deadline = time.monotonic() + grace_sec
        _stop_signal = signum


def stop_signal() -> int | None:
    """The signal that stopped this process (None: not stopping, or stopped by code)."""
    return _stop_signal


def stopping() -> bool:
    return _shutdown_deadline is not None


def cleanup_reserve(grace_sec: float) -> float:
    return min(CLEANUP_MAX_SEC, grace_sec * CLEANUP_SHARE)


def time_left(default: float) -> float:
    """Seconds until the stopping process must be gone (`default` when it is not stopping)."""
    return default if _shutdown_deadline is None else max(0.0, _shutdown_deadline - time.monotonic())


def closing_time(timeout_sec: float) -> float:
    """How long one closing step may take: `timeout_sec`, and when stopping no longer than leaves SERVERS_STOP_SEC
    before the deadline. The steps' own bounds add up to more than the reserve for closing; each one slow on a
    loaded machine must not push the whole stop past the grace period."""
    if _shutdown_deadline is None:
        return timeout_sec
    return max(0.05, min(timeout_sec, time_left(timeout_sec) - SERVERS_STOP_SEC))


def shutdown_budget(grace_sec: float) -> float:
    """How long in-flight work may still run: the grace period left, less the reserve for closing."""
    if _shutdown_deadline is None:
        return max(0.0, grace_sec - cleanup_reserve(grace_sec))
    return max(0.0, _shutdown_deadline - time.monotonic() - cleanup_reserve(grace_sec))


async def _bounded(part: str, closing: Awaitable[object], timeout_sec: float) -> None:
    try:
        await asyncio.wait_for(closing, closing_time(max(0.1, timeout_sec)))
    except Exception as exc:  # a part that is down or hangs must not stop the rest from closing
        log.warning("could not close cleanly", part=part, error=f"{type(exc).__name__}: {str(exc)[:200]}")


async def stop(timeout_sec: float = 5.0) -> None:
    """Close every shared resource, each bounded by `timeout_sec` and each whatever became of the others."""
    global _runtime
    rt = _runtime
    if rt is None:
        return
    _runtime = None
    principals.install(None)
    offload.shutdown(join_sec=closing_time(1.0))
    await _bounded("activity log", rt.activity.stop(), timeout_sec)
    if rt.arq is not None:
        await _bounded("job queue", rt.arq.aclose(), timeout_sec)
    await _bounded("redis", rt.redis.aclose(), timeout_sec)
    await _bounded("redis", rt.request_redis.aclose(), timeout_sec)
    await _bounded("database", db.dispose_engine(), timeout_sec)
    if rt.deps is not None:
        await _bounded("embedder", asyncio.to_thread(rt.deps.embedder.close), timeout_sec)
