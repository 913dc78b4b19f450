"""What keeps jobs moving when workers die: heartbeats, job claims, rescue of a dead worker's jobs, and a
bound on how often one job is tried.

arq marks a started job "in progress" for its whole timeout, so a job whose worker was killed would wait
that long before anyone retried it. Each worker therefore keeps a short-lived heartbeat key and claims the
jobs it runs; every worker's rescue pass frees the jobs claimed by a worker whose heartbeat has lapsed, and
arq hands them to the next free worker. Jobs are idempotent (they check the content's state first), so a
job whose worker merely stalled runs at most once more. A job tried `LEV_JOB_MAX_TRIES` times without
finishing marks its content and items failed with the reason instead of looping. A try that failed because
the database, Redis or the object store went away first waits (up to 15 minutes) until that part answers
again, so an outage costs a job one try however long it lasts, not one try per retry delay.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from arq.worker import Retry

from lev.archive import service as archive
from lev.core.errors import infrastructure_error
from lev.imports import service as imports
from lev.ingest.finish import fail_content
from lev.ingest.followups import EMBED, EXTRACT, TRANSCRIBE
from lev.ops import health, logs, metrics
from lev.plumbing.deps import Deps
from lev.tasks import fairshare

log = logs.get_logger("lev.worker")

HEARTBEATS_TO_DEATH = 5
WORKER_KEY = "lev:worker:"
CLAIM_KEY = "lev:claim:"
IN_PROGRESS_KEY = "arq:in-progress:"
OUTAGE_WAIT_MAX_SEC = 900.0
CONTENT_JOBS = frozenset({EMBED, EXTRACT, TRANSCRIBE})

WORKER_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


async def heartbeat(redis: Any, stop: asyncio.Event, every: float) -> None:
    """Refresh this worker's liveness key (every `every` seconds) and rescue dead workers' jobs until `stop` is
    set."""
    ttl_ms = int(every * HEARTBEATS_TO_DEATH * 1000)
    while not stop.is_set():
        try:
            await redis.set(WORKER_KEY + WORKER_ID, b"1", px=ttl_ms)
            await rescue_orphans(redis)
        except Exception as exc:  # Redis restarting: keep trying, the jobs are still ours
            log.warning("heartbeat failed", error=type(exc).__name__)
        try:
            await asyncio.wait_for(stop.wait(), every)
        except TimeoutError:
            pass
    try:
        await redis.delete(WORKER_KEY + WORKER_ID)
    except Exception:
        pass


async def rescue_orphans(redis: Any) -> int:
    """Free the jobs claimed by workers whose heartbeat has lapsed, so another worker runs them now."""
    freed = 0
    async for raw in redis.scan_iter(match=f"{IN_PROGRESS_KEY}*", count=500):
        key = raw.decode() if isinstance(raw, bytes) else raw
        job_id = key[len(IN_PROGRESS_KEY):]
        owner = await redis.get(CLAIM_KEY + job_id)
        if owner is None:
            continue
        owner_id = owner.decode()
        if await redis.exists(WORKER_KEY + owner_id):
            continue
        await redis.delete(key, CLAIM_KEY + job_id)
        freed += 1
        log.warning("rescued a job from a dead worker", job_id=job_id, dead_worker=owner_id)
    return freed


async def give_up(deps: Deps, job: str, args: tuple[Any, ...], tries: int, error: str | None = None) -> None:
    """Mark the content behind a job that never finished as failed, with the reason (an import: its pending
    links)."""
    if job == "run_import" and args:
        why = f"the import stopped after {tries - 1} failed attempts" + (f", last with {error}" if error else "")
        failed = await imports.give_up(deps, uuid.UUID(str(args[0])), why)
        log.error("import abandoned", import_id=str(args[0]), failed=failed, reason=why)
        return
    if job == "archive_page" and args:  # the page stays readable in Lev; only its copy is not made
        await archive.give_up(deps, uuid.UUID(str(args[0])), f"gave up after {tries - 1} attempts"
                              + (f", last with {error}" if error else ""))
        return
    if job not in CONTENT_JOBS or not args:
        return
    content_id = uuid.UUID(str(args[0]))
    reason = (f"processing failed {tries - 1} times, last with {error}" if error else
              f"processing was abandoned after {tries - 1} attempts that did not finish (worker crash or timeout)")
    if not await fail_content(deps, content_id, reason):
        return
    log.error("job abandoned", job=job, content_id=str(content_id), reason=reason)


def instrumented(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """The job as the worker runs it: claimed, bounded in tries, timed and counted, logged with its job id."""
    name = fn.__name__

    @functools.wraps(fn)
    async def run(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        job_id = ctx.get("job_id", "")
        tries = int(ctx.get("job_try", 1))
        logs.new_context(job_id=job_id, job=name, job_try=tries)
        redis = ctx.get("redis")
        deps: Deps = ctx["deps"]
        limit = deps.settings.job_max_tries
        if tries > limit:
            await give_up(deps, name, args, tries)
            metrics.observe_job(name, "abandoned", 0.0)
            return None
        if redis is not None and job_id:
            await redis.set(CLAIM_KEY + job_id, WORKER_ID.encode(), ex=int(ctx.get("claim_ttl", 3700)))
        started = time.perf_counter()
        outcome = "failed"
        try:
            async with fairshare.share(redis, deps, name, job_id, args):
                result = await fn(ctx, *args, **kwargs)
            outcome = "ok"
            return result
        except Retry:
            outcome = "deferred"  # its user's share of the slots is full: back to the queue for a moment
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception as exc:
            # the database, Redis or S3 went away mid-job (or a bug): try again later, within the bound
            outage = infrastructure_error(exc)
            if outage is not None:  # an outage costs one try, not one per retry delay while it lasts
                part = str(outage.extra.get("part"))
                log.warning("job hit an outage; waiting for the part to answer", part=part, tries=tries)
                back = await health.wait_until_answers(deps.db, deps.redis, deps.objects, part, OUTAGE_WAIT_MAX_SEC)
                log.info("part answers again; retrying" if back else "part still down; retrying", part=part)
            if tries < limit:
                outcome = "retried"
                log.warning("job failed; retrying", error=f"{type(exc).__name__}: {exc}"[:300], tries=tries)
                raise Retry(defer=deps.settings.job_retry_delay_sec * tries) from exc
            log.exception("job failed on its last try")
            await give_up(deps, name, args, tries + 1, f"{type(exc).__name__}: {str(exc)[:200]}")
            return None
        finally:
            metrics.observe_job(name, outcome, time.perf_counter() - started)
            if redis is not None and job_id:
                try:
                    await redis.delete(CLAIM_KEY + job_id)
                except Exception:
                    pass

    return run
