"""Process-wide resources opened at start-up: database engine, Redis, job queue, limiter, activity writer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from lev.embedded import resolve_urls
from lev.settings import Settings, get_settings


@dataclass
class Runtime:
    settings: Settings
    database_url: str
    redis_url: str
    redis: Any = None
    arq: Any = None
    limiter: Any = None
    activity: Any = None


_runtime: Runtime | None = None


def job_id(job: str, subject: Any) -> str:
    """The one arq job id of `job` on `subject` (a content or item id): queueing the same work twice (a retried
    request, the reconciler) finds the queued job instead of adding a second."""
    return f"{job}:{subject}"


async def enqueue(job: str, *args: Any, **kwargs: Any) -> None:
    """Queue a background job for the arq worker (jobs on a content or item get their fixed job id)."""
    if args and "_job_id" not in kwargs:
        kwargs["_job_id"] = job_id(job, args[0])
    await get_runtime().arq.enqueue_job(job, *args, **kwargs)


def get_runtime() -> Runtime:
    if _runtime is None:
        raise RuntimeError("runtime not started")
    return _runtime


async def start(settings: Settings | None = None, *, migrate: bool = True) -> Runtime:
    """Open every shared resource (idempotent within a process)."""
    global _runtime
    if _runtime is not None:
        return _runtime
    from redis.asyncio import Redis

    from lev.activity import ActivityWriter
    from lev.ratelimit import Limiter
    from store import db

    settings = settings or get_settings()
    db_url, redis_url = await asyncio.to_thread(
        resolve_urls, settings.database_url, settings.redis_url, settings.data_dir
    )
    if migrate:
        await asyncio.to_thread(db.migrate, db_url)
    from lev.embedder import check_dimension, get_embedder

    # Loads the model once per process and refuses to start on a vector-size mismatch.
    await asyncio.to_thread(check_dimension, get_embedder(), settings.embed_dim)
    db.init_engine(db_url)
    redis = Redis.from_url(redis_url)
    rt = Runtime(settings=settings, database_url=db_url, redis_url=redis_url, redis=redis)
    rt.limiter = Limiter(settings, redis_url, redis)
    rt.activity = ActivityWriter()
    rt.activity.start()
    from arq import create_pool
    from arq.connections import RedisSettings

    from tasks.worker import QUEUE

    rt.arq = await create_pool(RedisSettings.from_dsn(redis_url), default_queue_name=QUEUE)
    _runtime = rt
    return rt


async def stop() -> None:
    global _runtime
    rt = _runtime
    if rt is None:
        return
    from store import db

    await rt.activity.stop()
    if rt.arq is not None:
        await rt.arq.aclose()
    await rt.redis.aclose()
    await db.dispose_engine()
    _runtime = None
