"""Imports: `POST /api/v1/imports` reads the file (lev.imports.bookmarks; a ZIP of a folder: lev.imports.files),
creates its folders and records every link (or file) as a pending entry in one transaction, then the `run_import`
job ingests them in the background.

Durable like the rest of the pipeline: the entries in PostgreSQL are the record of the promised work. The job runs
in slices of a few minutes (each slice queues the next under its own fixed job id) and the reconciler re-queues a
running import whose job was lost. Re-running an entry is harmless: an entry whose link the user already has (by
URL, canonical URL or, for texts, the exact text) is only filed, never ingested twice. The imports of one user run
one at a time (a PostgreSQL advisory lock held on its own connection), so two imports of the same file cannot race.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import time
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import IO, Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal, require, require_whole_library
from lev.core.errors import ApiError, file_too_large, infrastructure_error, invalid_body, not_found
from lev.imports import files
from lev.imports.archive import is_zip
from lev.imports.bookmarks import parse
from lev.imports.importfile import Parsed, dedupe_key
from lev.ingest.request import IngestRequest, source_path
from lev.ingest.save import save_failed
from lev.ingest.service import ingest
from lev.ingest.urls import classify_media_url
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.plumbing.jobs import enqueue_job, job_id, requeue
from lev.store import imports as import_store
from lev.store import users as user_store
from lev.tags.names import lenient
from lev.tags.service import tag_new_item
from lev.webhooks import events

log = logs.get_logger("lev.imports")

SLICE_SEC = 240.0  # one job run works this long, then queues the next slice (job time bounds stay small)
ENTRY_TIMEOUT_SEC = 360.0  # one link: a page fetch, or a media download of up to 300 s
FAILURES_SHOWN = 500
PAGE = 50


def slice_job_id(import_id: uuid.UUID | str, slice_no: int) -> str:
    """The fixed arq job id of one slice of an import."""
    return job_id("run_import", f"{import_id}:{slice_no}")


def _lock_key(user_id: uuid.UUID) -> int:
    return int.from_bytes(hashlib.sha256(b"lev-import:" + user_id.bytes).digest()[:8], "big", signed=True)


async def start_upload(deps: Deps, principal: Principal, file: IO[bytes], filename: str | None,
                       folder: str | None = None) -> dict[str, Any]:
    """POST /imports: a ZIP of a folder (its top folder named `folder` when given), else a bookmark, CSV or Lev
    export file read whole; returns the import's status."""
    require(principal, "write")
    require_whole_library(principal, "import into the library")
    head = await asyncio.to_thread(_head, file)
    if is_zip(head, filename):
        root = source_path(folder.strip(), "folder") if folder and folder.strip() else None
        import_id = await files.record_archive(deps, principal, file, filename, root)
        return await _started(deps, principal, import_id)
    if folder is not None:
        raise invalid_body("`folder` names the top folder of a ZIP; this file is not one.")
    cap = deps.settings.import_max_bytes
    data = await asyncio.to_thread(file.read, cap + 1)
    return await start(deps, principal, data, filename)


def _head(file: IO[bytes]) -> bytes:
    file.seek(0)
    head = file.read(4)
    file.seek(0)
    return head


async def _started(deps: Deps, principal: Principal, import_id: uuid.UUID) -> dict[str, Any]:
    """Queue a recorded import's first slice (when it has entries); its status."""
    answer = await status(deps, principal, import_id)
    if answer["total"]:
        await enqueue_job(deps.queue, "run_import", str(import_id), 0, job_id=slice_job_id(import_id, 0))
    return answer


async def start(deps: Deps, principal: Principal, data: bytes, filename: str | None) -> dict[str, Any]:
    """Read the file, create its folders, record its links and queue the import; returns its status."""
    require(principal, "write")
    require_whole_library(principal, "import into the library")
    cap = deps.settings.import_max_bytes
    if len(data) > cap:
        raise file_too_large(f"Import files are limited to {cap} bytes ({cap // (1 << 20)} MiB).", cap)
    with _collector_paused():
        parsed = await asyncio.to_thread(parse, data)  # CPU-bound: never on the event loop
        async with deps.db.transaction() as s:
            ids, created = await import_store.ensure_folders(s, principal.user_id, list(parsed.folders.values()))
            by_key = {key: ids[name.lower()] for key, name in parsed.folders.items()}
            entries = await asyncio.to_thread(_entries, parsed, by_key)
            import_id = await import_store.create_import(
                s, user_id=principal.user_id, token_id=principal.token_id, fmt=parsed.format,
                filename=(filename or "")[:300] or None, size_bytes=len(data), folder_ids=list(
                    dict.fromkeys(by_key.values())), folders_created=created, skipped=parsed.skipped[:1000],
                entries=entries)
        total = len(entries)
        held = [parsed, entries]
        del parsed, entries
        await asyncio.to_thread(_release, held)
    if total:
        await enqueue_job(deps.queue, "run_import", str(import_id), 0, job_id=slice_job_id(import_id, 0))
    return await status(deps, principal, import_id)


def _release(held: list[Any]) -> None:
    """Free an import's parsed file and entries a thousand at a time, in a worker thread: freed at once on the event
    loop, 100,000 entries held it for most of a second (deallocation runs in C, without a pause for other threads)."""
    parsed, entries = held
    held.clear()
    for items in (entries, parsed.links):
        while items:
            del items[-1000:]


_paused = 0


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while an import is read and stored. A file of 100,000 links makes about a
    million objects; each full collection over them held the GIL, and so the event loop, for up to a third of a
    second (measured: /healthz p99 0.8 s while such a file was imported; 7 ms with the collector paused). Nothing
    read is cyclic: it is freed by reference counting. Counted (on the event loop, so without a lock): overlapping
    imports resume it once."""
    global _paused
    _paused += 1
    gc.disable()
    try:
        yield
    finally:
        _paused -= 1
        if _paused == 0:
            gc.enable()


def _entries(parsed: Parsed, by_key: dict[str, uuid.UUID]) -> list[dict[str, Any]]:
    """The import's entries as the store records them (each `pending`), in file order."""
    return [{
        "line": link.line, "url": link.url, "text": link.text, "kind": "url" if link.url else "text",
        "title": link.title, "metadata": link.metadata, "folder_ids": [by_key[k] for k in link.folders],
        "in_kb": link.in_kb, "archived": link.archived, "outputs": link.outputs, "status": "pending",
        "existing": False,
    } for link in parsed.links]


async def status(deps: Deps, principal: Principal, import_id: uuid.UUID) -> dict[str, Any]:
    """Progress of one of the user's imports: counts, its folders, the failed links with their reasons."""
    require_whole_library(principal, "read imports")
    async with deps.db.transaction() as s:
        row = await import_store.get_import(s, principal.user_id, import_id)
        if row is None:
            raise not_found()
        found = await import_store.live_folders(s, principal.user_id, row["folder_ids"])
        failed = await import_store.failures(s, import_id, FAILURES_SHOWN)
        lost = await import_store.lost_highlights(s, import_id, FAILURES_SHOWN)
    total, done, failures = int(row["total"]), int(row["done"]), int(row["failed"])
    present, updated = int(row["already_present"]), int(row["updated"])
    return {
        "id": str(row["id"]), "status": row["status"], "format": row["format"], "filename": row["filename"],
        "size_bytes": row["size_bytes"], "total": total, "done": done, "failed": failures,
        "pending": total - done - failures, "already_present": present,
        "added": done - present - updated, "updated": updated, "unchanged": present,
        "skipped_total": row["skipped_total"] if row["skipped_total"] is not None else len(row["skipped"]),
        "folders_created": row["folders_created"], "folders": found,
        "failures": [{"line": f["line"], "url": f["url"], "path": f["path"], "title": f["title"],
                      "error": f["error"] or "failed", "item_id": str(f["item_id"]) if f["item_id"] else None}
                     for f in failed],
        "highlights_lost": [{"path": h["path"], "item_id": str(h["item_id"]), "highlights": h["lost"]} for h in lost],
        "skipped": row["skipped"], "created_at": row["created_at"].isoformat(),
        "finished_at": row["finished_at"].isoformat() if row["finished_at"] else None,
    }


async def recent(deps: Deps, principal: Principal, limit: int = 20) -> list[dict[str, Any]]:
    require_whole_library(principal, "read imports")
    async with deps.db.transaction() as s:
        ids = await import_store.list_recent(s, principal.user_id, limit)
    return [await status(deps, principal, i) for i in ids]


# ------------------------------------------------------------------------------------------------ the job


async def run_slice(deps: Deps, import_id: uuid.UUID, slice_no: int) -> int:
    """One run of the import job: ingest pending links for up to SLICE_SEC, then queue the next slice, or mark the
    import done and start the user's next import. Returns the entries finished."""
    async with deps.db.transaction() as s:
        row = await import_store.import_row(s, import_id)
        user = await user_store.by_id(s, row["user_id"]) if row else None
    if row is None or user is None or row["status"] != "running" or row["slice"] != slice_no:
        return 0  # finished, deleted, or a later slice owns it
    principal = Principal(token_id=row["token_id"], user_id=row["user_id"], name="import",
                          capabilities=frozenset({"read", "write"}), is_unscoped=True, folder_ids=frozenset(),
                          kb_only=False, write_cap=0, tier=user["tier"])
    following: int | None = None
    finished = False
    others: list[dict[str, Any]] = []
    async with deps.db.try_advisory_lock(_lock_key(row["user_id"])) as held:
        if not held:
            return 0  # another import of this user is running; it starts this one when it is done
        async with files.opened(deps, row) as archive:
            count, more = await _work(deps, principal, row, archive)
        async with deps.db.transaction() as s:
            if more:
                following = await import_store.next_slice(s, import_id, slice_no)
            else:
                finished, now = await import_store.complete_if_done(s, import_id)
                if now:
                    await _announce(s, row["user_id"], import_id)
                others = await import_store.running(s, user_id=row["user_id"]) if finished else []
    # queued only after the lock is released, so the next run can take it
    if following is not None:
        await enqueue_job(deps.queue, "run_import", str(import_id), following,
                          job_id=slice_job_id(import_id, following))
    elif finished:
        for other in others:
            await requeue(deps.queue, "run_import", str(other["id"]), other["slice"],
                          job_id=slice_job_id(other["id"], other["slice"]))
    return count


class _Pager:
    """Hands out the import's pending entries in file order, a page at a time, to the concurrent workers."""

    def __init__(self, deps: Deps, import_id: uuid.UUID) -> None:
        self.deps = deps
        self.import_id = import_id
        self.buffer: list[dict[str, Any]] = []
        self.after = -1
        self.exhausted = False
        self.lock = asyncio.Lock()

    async def next(self) -> dict[str, Any] | None:
        async with self.lock:
            if not self.buffer and not self.exhausted:
                async with self.deps.db.transaction() as s:
                    self.buffer = await import_store.pending_page(s, self.import_id, self.after, PAGE)
                self.exhausted = not self.buffer
            if not self.buffer:
                return None
            entry = self.buffer.pop(0)
            self.after = entry["ord"]
            return entry


async def _work(deps: Deps, principal: Principal, row: dict[str, Any],
                archive: zipfile.ZipFile | None) -> tuple[int, bool]:
    """Run the pending entries with bounded concurrency until none is left or the slice's time is up; returns the
    entries finished and whether some are left."""
    deadline = time.monotonic() + SLICE_SEC
    pager = _Pager(deps, row["id"])
    finished = 0

    async def worker() -> None:
        nonlocal finished
        while time.monotonic() < deadline:
            entry = await pager.next()
            if entry is None:
                return
            await _run_entry(deps, principal, row["created_at"], entry, archive)
            finished += 1

    async with asyncio.TaskGroup() as group:
        for _ in range(max(1, deps.settings.import_concurrency)):
            group.create_task(worker())
    return finished, not (pager.exhausted and not pager.buffer)


async def _run_entry(deps: Deps, principal: Principal, started: datetime, entry: dict[str, Any],
                     archive: zipfile.ZipFile | None) -> None:
    """Import one entry (a link, a text, or a ZIP's file); anything but an outage of the database or Redis ends as
    the entry's failure."""
    try:
        async with asyncio.timeout(ENTRY_TIMEOUT_SEC):
            if entry["kind"] == "file":
                await files.import_file(deps, principal, started, entry, archive)
            else:
                await _import_entry(deps, principal, started, entry)
    except Exception as exc:
        if infrastructure_error(exc) is not None:
            raise  # the job is retried; the entry is still pending
        reason = (f"gave up after {int(ENTRY_TIMEOUT_SEC)} s" if isinstance(exc, TimeoutError)
                  else f"unexpected error: {type(exc).__name__}: {exc}")
        log.warning("import entry failed", line=entry["line"], error=reason[:300])
        await _fail(deps, principal, started, entry, reason)


async def _existing(deps: Deps, user_id: uuid.UUID, entry: dict[str, Any]) -> dict[str, Any] | None:
    async with deps.db.transaction() as s:
        if entry["url"] is not None:
            key = dedupe_key(entry["url"])
            return await import_store.existing_by_url(s, user_id, [entry["url"], key], [key])
        return await import_store.existing_by_text(s, user_id, entry["text"] or "")


async def _import_entry(deps: Deps, principal: Principal, started: datetime, entry: dict[str, Any]) -> None:
    found = await _existing(deps, principal.user_id, entry)
    if found is not None:  # already in the library (or stored by an earlier run of this entry): only file it
        ours = found["created_at"] >= started
        await _finish(deps, principal, entry, found["id"], ours=ours, existing=not ours)
        return
    try:
        kind = "url" if entry["url"] is not None else "text"
        stored = await ingest(deps, principal, IngestRequest(kind, url=entry["url"], text=entry["text"],
                                                             title=entry["title"], in_kb=entry["in_kb"]))
    except ApiError as exc:
        await _fail(deps, principal, started, entry, exc.message or exc.code)
        return
    await _finish(deps, principal, entry, stored.item_id, ours=True, existing=False)


async def _finish(deps: Deps, principal: Principal, entry: dict[str, Any], item_id: uuid.UUID, *, ours: bool,
                  existing: bool, error: str | None = None) -> None:
    """File the entry's item and mark the entry done; the tags the file gives it (its metadata's `tags`) become
    the item's tags, added to those an item the user had already carries."""
    meta = dict(entry["metadata"] or {})
    raw = meta.pop("tags", None)
    names = lenient(raw) if isinstance(raw, list) else []
    async with deps.db.transaction() as s:
        kept = await import_store.finish_entry(s, {**entry, "metadata": meta}, item_id, ours=ours, existing=existing,
                                               error=error)
        if kept:
            await tag_new_item(s, principal.user_id, item_id, names, announce=True)


async def _fail(deps: Deps, principal: Principal, started: datetime, entry: dict[str, Any], reason: str) -> None:
    """The entry failed: a link becomes a failed item saying why (filed like the rest); a text that cannot be
    stored, or a ZIP's file, fails without an item."""
    if entry["kind"] == "file":
        async with deps.db.transaction() as s:
            await import_store.fail_entry(s, entry, reason)
        return
    found = await _existing(deps, principal.user_id, entry)
    if found is not None:
        await _finish(deps, principal, entry, found["id"], ours=found["created_at"] >= started, existing=False,
                      error=reason)
    elif entry["url"] is not None:
        item_id = await save_failed(deps, principal, kind=classify_media_url(entry["url"]) or "url", url=entry["url"],
                                    title=entry["title"], error=reason, in_kb=entry["in_kb"])
        await _finish(deps, principal, entry, item_id, ours=True, existing=False, error=reason)
    else:
        async with deps.db.transaction() as s:
            await import_store.fail_entry(s, entry, reason)


async def give_up(deps: Deps, import_id: uuid.UUID, reason: str) -> int:
    """A slice that kept failing: its pending entries fail with the reason and the import is done."""
    async with deps.db.transaction() as s:
        failed = await import_store.fail_pending(s, import_id, reason)
        row = await import_store.import_row(s, import_id)
        if row is not None and (await import_store.complete_if_done(s, import_id))[1]:
            await _announce(s, row["user_id"], import_id)
        return failed


async def _announce(s: AsyncSession, user_id: uuid.UUID, import_id: uuid.UUID) -> None:
    """import.finished, in the transaction that marks the import done."""
    row = await import_store.get_import(s, user_id, import_id)
    if row is None:
        return
    total, failed, present, updated = (int(row[k]) for k in ("total", "failed", "already_present", "updated"))
    await events.record(s, user_id, "import.finished", {
        "import_id": str(import_id), "status": "done", "total": total, "done": int(row["done"]), "failed": failed,
        "already_present": present, "added": int(row["done"]) - present - updated, "updated": updated,
        "folder_ids": [str(f) for f in row["folder_ids"]]})
