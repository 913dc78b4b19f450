"""Cron jobs: re-queueing unfinished work, draining the object-deletion queue, expiring unfinalized uploads,
purging old activity, finding the pages of PDFs stored before pages were kept."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from lev.core import clock
from lev.core.errors import ApiError
from lev.imports.service import slice_job_id
from lev.ingest.documents import page_texts
from lev.ingest.finish import to_finish
from lev.ingest.followups import archiving, transforms
from lev.ingest.uploads import UPLOAD_EXPIRY
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.plumbing.jobs import requeue
from lev.store import activity, sessions
from lev.store import archives as archive_store
from lev.store import contents as content_store
from lev.store import imports as import_store
from lev.store import oauth as oauth_store
from lev.store import uploads as upload_store
from lev.store.db import Database
from lev.store.locations import Outline, location, page_outline
from lev.store.objects import InvalidObjectPath, ObjectStore

log = logs.get_logger("lev.worker")

RECONCILE_GRACE_SEC = 5  # work younger than this may still be between its commit and its enqueue
TRANSFORM_WINDOW = timedelta(days=1)  # a transform that keeps failing is tried again for a day, no longer


async def drain_object_deletions(ctx: dict[str, Any]) -> int:
    """Delete stored objects queued by item deletes and expired uploads; failures stay queued with attempts + 1."""
    return await _drain(ctx["deps"].db, ctx["deps"].objects)


async def _drain(db: Database, store: ObjectStore) -> int:
    done = 0
    async with db.transaction() as s:
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
                log.warning("object deletion failed", path=path, attempt=row["attempts"] + 1, error=str(exc)[:300])
            else:
                await upload_store.deletion_done(s, path)
                done += 1
    return done


async def expire_uploads(ctx: dict[str, Any]) -> int:
    """Forget uploads signed more than 24 h ago whose objects no item uses, and delete those objects."""
    deps: Deps = ctx["deps"]
    async with deps.db.transaction() as s:
        paths = await upload_store.expire_before(s, clock.now() - UPLOAD_EXPIRY)
    if paths:
        await _drain(deps.db, deps.objects)
    return len(paths)


async def reconcile_unfinished(ctx: dict[str, Any]) -> int:
    """Re-queue the unfinished work whose job is gone (lost with Redis, or never queued because the process
    died between commit and enqueue): the database, not the queue, is the record of acknowledged work. That is
    contents still processing, imports still running, and the transforms of the last day's ready items that have
    none (their job was queued when the item became ready: Redis may have lost it since), and pages still waiting
    for their archived copy."""
    deps: Deps = ctx["deps"]
    settled = datetime.now(UTC) - timedelta(seconds=RECONCILE_GRACE_SEC)
    async with deps.db.read_session() as s:
        contents = await content_store.unfinished(s, settled)
        running = await import_store.running(s, settled_before=settled)
        untransformed = await content_store.untransformed(s, settled, settled - TRANSFORM_WINDOW)
        pages = await archive_store.due(s, settled)
    work = [(f.job, f.args, f.job_id) for f in [*map(to_finish, contents), *transforms(untransformed),
                                                 *(a for p in pages for a in archiving(p))]]
    work += [("run_import", (str(r["id"]), r["slice"]), slice_job_id(r["id"], r["slice"])) for r in running]
    queued = 0
    for job, args, jid in work:
        if await requeue(deps.queue, job, *args, job_id=jid):
            queued += 1
            log.warning("re-queued unfinished work", job=job, subject=str(args[0]))
    return queued


async def purge_activity(ctx: dict[str, Any]) -> int:
    """Delete activity entries older than the retention setting (90 days by default), expired sessions, OAuth codes
    expired a day ago and self-registered OAuth clients that got no grant within a week."""
    deps: Deps = ctx["deps"]
    cutoff = clock.now() - timedelta(days=deps.settings.activity_retention_days)
    async with deps.db.transaction() as s:
        n = await activity.purge_before(s, cutoff)
        ended = await sessions.purge_expired(s)
        codes, clients = await oauth_store.purge(s, clock.now() - timedelta(days=1), clock.now() - timedelta(days=7))
    level = log.info if n or ended or codes or clients else log.debug
    level("purged activity entries, expired sessions, OAuth codes and unused OAuth clients", activity=n,
          older_than=cutoff.isoformat(), sessions=ended, oauth_codes=codes, oauth_clients=clients)
    return n


PAGES_PER_RUN = 20


async def locate_pdf_pages(ctx: dict[str, Any]) -> int:
    """The pages of PDFs stored before Lev kept them (migration 0015 gave their chunks characters and headings):
    each stored file's text layers read again, where its pages start found in the stored text, and every chunk's
    page and page_end set from its characters. A file that is gone or unreadable is marked, not tried again."""
    deps: Deps = ctx["deps"]
    async with deps.db.read_session() as s:
        todo = await content_store.pdfs_without_pages(s, PAGES_PER_RUN)
    for row in todo:
        outline = await _pages_of(deps, row)
        async with deps.db.transaction() as s:
            found = Outline.from_json(outline)
            places = await content_store.chunk_places(s, row["id"])
            pages = [(cid, w.page, w.page_end) for cid, a, b in places
                     for w in [location((a, b) if a is not None and b is not None else None, found)]]
            await content_store.set_pages(s, row["id"], outline, pages)
    if todo:
        log.info("found the pages of PDFs stored before pages were kept", pdfs=len(todo))
    return len(todo)


async def _pages_of(deps: Deps, row: dict[str, Any]) -> dict[str, Any]:
    """The outline with the PDF's page starts (its headings kept), or a mark that they cannot be known."""
    try:
        local = await deps.objects.local_copy(row["object_path"])
    except (FileNotFoundError, InvalidObjectPath):
        return {"pages_unknown": True}
    try:
        pages = await asyncio.to_thread(page_texts, local)
    except ApiError:
        return {"pages_unknown": True}
    finally:
        local.unlink(missing_ok=True)
    found = page_outline(row["text"] or "", pages)
    return found.to_json() or {"pages_unknown": True}
