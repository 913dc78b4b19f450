"""Cron jobs: draining the object-deletion queue, expiring unfinalized uploads, purging old activity."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from lev import clock
from lev.pipeline.uploads import UPLOAD_EXPIRY
from lev.settings import get_settings
from store import activity, sessions
from store import uploads as upload_store
from store.db import session_scope
from store.objects import InvalidObjectPath, ObjectStore

log = logging.getLogger("lev.worker")


async def drain_object_deletions(ctx: dict[str, Any]) -> int:
    """Delete stored objects queued by item deletes and expired uploads; failures stay queued with attempts + 1."""
    return await _drain(ctx["object_store"])


async def _drain(store: ObjectStore) -> int:
    done = 0
    async with session_scope() as s:
        for row in await upload_store.pending_deletions(s):
            path = row["path"]
            if await upload_store.still_referenced(s, path):
                await upload_store.deletion_done(s, path)
                continue
            try:
                await store.delete(path)
            except InvalidObjectPath:
                await upload_store.deletion_done(s, path)  # nothing we could ever have stored there
            except Exception as exc:
                await upload_store.deletion_failed(s, path, f"{type(exc).__name__}: {exc}")
                log.warning("object deletion failed for %s (attempt %d): %s", path, row["attempts"] + 1, exc)
            else:
                await upload_store.deletion_done(s, path)
                done += 1
    return done


async def expire_uploads(ctx: dict[str, Any]) -> int:
    """Forget uploads signed more than 24 h ago whose objects no item uses, and delete those objects."""
    async with session_scope() as s:
        paths = await upload_store.expire_before(s, clock.now() - UPLOAD_EXPIRY)
    if paths:
        await _drain(ctx["object_store"])
    return len(paths)


async def purge_activity(_ctx: dict[str, Any]) -> int:
    """Delete activity entries older than the retention setting (90 days by default) and expired sessions."""
    cutoff = clock.now() - timedelta(days=get_settings().activity_retention_days)
    async with session_scope() as s:
        n = await activity.purge_before(s, cutoff)
        ended = await sessions.purge_expired(s)
    log.info("purged %d activity entries older than %s and %d expired sessions", n, cutoff.isoformat(), ended)
    return n
