"""The activity log writer: entries are queued on the request path and written in batches.

A failure to write never fails a request; `stop()` drains the queue on a clean shutdown. The same
flush updates tokens' `last_used_at` once per token per batch instead of once per request.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lev.ops import logs
from lev.store import activity as activity_store
from lev.store.db import Database

log = logs.get_logger("lev.ops.activity")

FLUSH_SECONDS = 0.5
BATCH = 500


class ActivityWriter:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=100_000)
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="lev-activity")

    def record(self, entry: dict[str, Any]) -> None:
        # A NUL (e.g. from a request path with %00) would make PostgreSQL refuse the whole batch.
        entry = {k: v.replace("\x00", "\ufffd") if isinstance(v, str) else v for k, v in entry.items()}
        try:
            self.queue.put_nowait(entry)
        except asyncio.QueueFull:
            log.warning("activity queue full; dropping an entry")

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), FLUSH_SECONDS)
            except TimeoutError:
                pass
            await self.flush()

    async def flush(self) -> int:
        """Write the entries queued when the flush began, in batches; returns how many were written.

        Entries queued while a batch is being written wait for the next flush: under steady traffic a flush that
        chased the queue until it was empty would never end, writing a few entries at a time (each write is a
        transaction and a token update, about 3 ms of this process's CPU) instead of one batch per interval."""
        written = 0
        pending = self.queue.qsize()
        while pending > 0:
            batch: list[dict[str, Any]] = []
            while pending > 0 and len(batch) < BATCH:
                try:
                    batch.append(self.queue.get_nowait())
                except asyncio.QueueEmpty:  # another flush (clearing the log) took them
                    pending = 0
                    break
                pending -= 1
            if not batch:
                break
            try:
                await _write(self.db, batch)
                written += len(batch)
            except Exception:
                log.exception("could not write activity entries", entries=len(batch))
        return written

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.flush()


async def _write(db: Database, batch: list[dict[str, Any]]) -> None:
    async with db.transaction() as s:
        await activity_store.write_batch(s, batch)
