"""Liveness, readiness and queue figures for operators (`/healthz`, `/readyz`, `/metrics`).

Readiness checks every part a request may need, concurrently and each bounded by `CHECK_TIMEOUT_SEC`, so a
balancer's probe answers quickly even while a part hangs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lev.core.errors import unavailable
from lev.store import db
from lev.store.objects import ObjectStore

CHECK_TIMEOUT_SEC = 2.0
ARQ_IN_PROGRESS_PREFIX = "arq:in-progress:"
QUEUE_SCAN_MAX = 10_000


async def _migrations(database: db.Database) -> str:
    current = await database.current_revision()
    head = db.head_revision_cached()
    if current == head:
        return "ok"
    if current is not None and not db.knows_revision(current):  # a newer release migrated it: still compatible
        return f"ok (database at {current}, newer than this release's {head})"
    raise RuntimeError(f"database at migration {current}, this code expects {head}: run `lev migrate`")


def _probes(database: db.Database, redis: Any, objects: ObjectStore) -> dict[str, Callable[[], Awaitable[str]]]:
    async def database_answers() -> str:
        await database.ping()
        return "ok"

    async def migrations() -> str:
        return await _migrations(database)

    async def redis_answers() -> str:
        await redis.ping()
        return "ok"

    async def objects_answer() -> str:
        await objects.ping()
        return "ok"

    return {"database": database_answers, "migrations": migrations, "redis": redis_answers,
            "object_store": objects_answer}


async def wait_until_answers(database: db.Database, redis: Any, objects: ObjectStore, part: str,
                             max_wait_sec: float, every_sec: float = 0.5) -> bool:
    """Probe `part` (database, redis or object_store) until it answers or `max_wait_sec` passes; True when it
    answered. The probe interval doubles up to 5 s."""
    deadline = time.monotonic() + max_wait_sec
    probe = _probes(database, redis, objects)[part]
    while True:
        if (await _bounded(part, probe))[1] is None:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await asyncio.sleep(min(every_sec, left))
        every_sec = min(every_sec * 2, 5.0)


async def _bounded(name: str, check: Any) -> tuple[str, str | None]:
    try:
        await asyncio.wait_for(check(), CHECK_TIMEOUT_SEC)
        return name, None
    except TimeoutError:
        return name, f"no answer within {CHECK_TIMEOUT_SEC:g} s"
    except Exception as exc:  # any failure of a part is the answer, not an error of the probe
        message = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        return name, f"{type(exc).__name__}: {message}" if message else type(exc).__name__


async def readiness(database: db.Database, redis: Any, objects: ObjectStore) -> dict[str, Any]:
    """{status: ready, checks} when every part answers, else raise 503 `unavailable` naming the failed parts."""
    results: list[tuple[str, str | None]] = list(await asyncio.gather(
        *(_bounded(name, probe) for name, probe in _probes(database, redis, objects).items())))
    failed = [name for name, problem in results if problem is not None]
    if "database" in failed and "migrations" in failed:
        failed.remove("migrations")
        results = [(n, p if n != "migrations" else "unknown while the database is unreachable") for n, p in results]
    checks = {name: problem or "ok" for name, problem in results}
    if failed:
        raise unavailable(f"Not ready: {', '.join(failed)} failed.", failed=failed, checks=checks)
    return {"status": "ready", "checks": checks}


async def queue_snapshot(r: Any, queue: str) -> dict[str, float]:
    """Jobs waiting, jobs running and the age of the oldest job due to run (0 when none is) in arq's `queue`.

    arq keeps a job in its queue until it finishes and marks a running one with an in-progress key."""
    now_ms = time.time() * 1000
    total = await r.zcard(queue)
    jobs = await r.zrange(queue, 0, QUEUE_SCAN_MAX - 1, withscores=True)
    running = await r.mget([f"{ARQ_IN_PROGRESS_PREFIX}{job_id.decode()}" for job_id, _ in jobs]) if jobs else []
    in_progress = sum(flag is not None for flag in running)
    due = [score for (_, score), flag in zip(jobs, running, strict=True) if flag is None and score <= now_ms]
    age = max(0.0, (now_ms - due[0]) / 1000) if due else 0.0
    return {"depth": max(0, total - in_progress), "in_progress": in_progress, "oldest_age": round(age, 3)}
