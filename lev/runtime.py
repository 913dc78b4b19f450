"""Process-wide resources: database engine, Redis, job queue, limiter, activity writer, object store, and the
embedder with its query batcher (built here, once per process, and handed to whoever embeds)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from arq import create_pool
from arq.connections import RedisSettings
from redis.asyncio import Redis

from lev.auth import principal_cache as principals
from lev.core.settings import Settings, get_settings
from lev.embedded import resolve_urls
from lev.embedding.embedder import Embedder, build_embedder, check_dimension
from lev.embedding.pool import QueryBatcher
from lev.limits.ratelimit import Limiter
from lev.ops import logs
from lev.ops.activity import ActivityWriter
from store import db
from store.objects import LocalObjectStore, ObjectStore, S3ObjectStore, load_or_create_secret


@dataclass
class Runtime:
    settings: Settings
    database_url: str
    redis_url: str
    redis: Any = None
    arq: Any = None
    limiter: Any = None
    activity: Any = None
    principals: Any = None
    embedder: Embedder | None = None
    queries: QueryBatcher | None = None  # search queries' embeddings, batched on their own thread


_runtime: Runtime | None = None

log = logs.get_logger("lev.runtime")
QUEUE = "lev:queue"  # the arq queue the API enqueues to and the worker reads


def job_id(job: str, subject: Any) -> str:
    """The one arq job id of `job` on `subject` (a content or item id): queueing the same work twice (a retried
    request, the reconciler) finds the queued job instead of adding a second."""
    return f"{job}:{subject}"


async def enqueue(job: str, *args: Any, **kwargs: Any) -> None:
    """Queue a background job for the arq worker (jobs on a content or item get their fixed job id)."""
    if args and "_job_id" not in kwargs:
        kwargs["_job_id"] = job_id(job, args[0])
    await get_runtime().arq.enqueue_job(job, *args, **kwargs)


async def requeue(job: str, *args: Any, job_id: str) -> bool:
    """Queue `job` under its fixed id unless that job is queued or running now (a finished run's result is
    cleared first, or arq would refuse the id); True when it was queued."""
    redis = get_runtime().arq
    if await redis.exists(f"arq:job:{job_id}", f"arq:in-progress:{job_id}"):
        return False
    await redis.delete(f"arq:result:{job_id}", f"arq:retry:{job_id}")
    return await redis.enqueue_job(job, *args, _job_id=job_id) is not None


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


def get_runtime() -> Runtime:
    if _runtime is None:
        raise RuntimeError("runtime not started")
    return _runtime


def embedder() -> Embedder:
    """The process's embedder (for callers that are not handed it yet)."""
    rt = get_runtime()
    assert rt.embedder is not None
    return rt.embedder


def query_batcher() -> QueryBatcher:
    """The process's search-query batcher (for handlers, which Connexion calls without it)."""
    rt = get_runtime()
    assert rt.queries is not None
    return rt.queries


async def start(settings: Settings | None = None, *, migrate: bool = True, ingest_processes: int = 0) -> Runtime:
    """Open every shared resource (idempotent within a process). The embedder sends its batches to
    `ingest_processes` low-priority child processes (0: computes them here); it starts (model loaded, children
    up) while the embedded servers start, and its vector size is checked against the database column."""
    global _runtime
    if _runtime is not None:
        return _runtime
    settings = settings or get_settings()
    emb = build_embedder(settings, ingest_processes)
    try:
        loaded, urls = await asyncio.gather(asyncio.to_thread(emb.start),
                                            asyncio.to_thread(resolve_urls, settings.database_url,
                                                              settings.redis_url, settings.data_dir),
                                            return_exceptions=True)
        if isinstance(loaded, BaseException):
            raise loaded
        if isinstance(urls, BaseException):
            raise urls
        db_url, redis_url = urls
        await asyncio.to_thread(check_dimension, emb)  # refuses to start on a vector-size mismatch
        if migrate:
            newer = await asyncio.to_thread(db.migrate, db_url)
            if newer is not None:
                log.warning("the database is at a newer release's migration; running on it as it is",
                            database=newer, this_release=db.head_revision_cached())
    except BaseException:
        await asyncio.to_thread(emb.close)
        raise
    db.init_engine(db_url, settings.db_pool_size, generic_plans=settings.db_generic_plans)
    redis = Redis.from_url(redis_url)
    rt = Runtime(settings=settings, database_url=db_url, redis_url=redis_url, redis=redis, embedder=emb,
                 queries=QueryBatcher(emb.embed_queries, max(1, settings.query_batch_max)))
    rt.limiter = Limiter(settings, redis_url, redis)
    rt.activity = ActivityWriter()
    rt.principals = principals.PrincipalCache(redis, settings.principal_cache_sec)
    principals.install(rt.principals)
    rt.activity.start()
    rt.arq = await create_pool(RedisSettings.from_dsn(redis_url), default_queue_name=QUEUE)
    _runtime = rt
    return rt


async def stop() -> None:
    global _runtime
    rt = _runtime
    if rt is None:
        return
    principals.install(None)
    await rt.activity.stop()
    if rt.arq is not None:
        await rt.arq.aclose()
    await rt.redis.aclose()
    await db.dispose_engine()
    if rt.embedder is not None:
        await asyncio.to_thread(rt.embedder.close)
    _runtime = None
