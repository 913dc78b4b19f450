"""An item's archived copy: made by the worker from the page kept with its content (`make`, the `archive_page` job),
stored in the object store, and read back for a caller that can see the item (`read`).

Served harmlessly (`lev.handlers.items.get_item_archive`): `lev.core.pagepolicy.ARCHIVE_POLICY` (a CSP sandbox, no
script, every load but `data:` images and styles refused) with `nosniff`, so the copy runs in an opaque origin
without the session cookie's authority over Lev; `?download=true` sends it as a file instead. A copy outlives its
page: once made it is Lev's, whatever the site answers later."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from pathlib import Path
from typing import Any

from lev.archive.snapshot import MAX_SNAPSHOT_BYTES, build
from lev.auth.policy import Principal, require
from lev.core import context
from lev.core.errors import not_found
from lev.net import share
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.store import archives as archive_store
from lev.store import uploads as upload_store
from lev.store.owners import owner_of

log = logs.get_logger("lev.archive")


async def make(deps: Deps, content_id: uuid.UUID) -> int:
    """Make the snapshot of a content's page and store it; its size in bytes (0: nothing to do, or it failed and
    says why). Its fetches count as the saver's (the per-user fair share of outbound slots)."""
    async with deps.db.read_session() as s:
        row = await archive_store.pending(s, content_id)
        user = await owner_of(s, "content", content_id) if row else None
    if row is None or row["source"] is None:
        return 0
    try:
        with share.on_behalf_of(user) if user else contextlib.nullcontext():
            snap = await build(deps.outbound, bytes(row["source"]), row["url"], charset=row["charset"])
    except Exception as exc:  # a page lxml cannot read: the item stays as it is, without a copy
        async with deps.db.transaction() as s:
            await archive_store.fail(s, content_id, f"{type(exc).__name__}: {exc}")
        log.warning("archived copy failed", content_id=str(content_id), error=type(exc).__name__)
        return 0
    path = deps.objects.new_path(str(user or "archive"), "archive.html")
    local = await asyncio.to_thread(_written, snap.html)
    try:
        await deps.objects.put_file(path, local, "text/html")
    finally:
        local.unlink(missing_ok=True)
    async with deps.db.transaction() as s:
        kept = await archive_store.finish(s, content_id, object_path=path, size=len(snap.html),
                                          resources=snap.resources, skipped=snap.skipped)
        if not kept:  # the content went (or another run archived it) meanwhile: this copy is nobody's
            await upload_store.queue_deletion(s, [path])
    log.info("archived copy made", content_id=str(content_id), bytes=len(snap.html), resources=snap.resources,
             skipped=len(snap.skipped))
    return len(snap.html) if kept else 0


async def give_up(deps: Deps, content_id: uuid.UUID, reason: str) -> None:
    """A copy whose job never finished: marked failed with the reason, so nothing queues it again."""
    async with deps.db.transaction() as s:
        await archive_store.fail(s, content_id, reason)
    log.error("archived copy abandoned", content_id=str(content_id), reason=reason[:300])


def _written(data: bytes) -> Path:
    with tempfile.NamedTemporaryFile(prefix="lev-archive-", suffix=".html", delete=False) as f:
        f.write(data)
        return Path(f.name)


async def read(deps: Deps, principal: Principal, item_id: uuid.UUID) -> tuple[bytes, str, dict[str, Any]]:
    """A visible item's archived copy (its bytes, a file name, and its record); 404 when there is none (yet)."""
    require(principal, "read")
    async with deps.db.read_session() as s:
        row = await archive_store.of_item(s, principal.scope, item_id)
    if row is None or row["status"] != archive_store.READY or not row["object_path"]:
        raise not_found("The item does not exist, is outside this token's scope, or has no archived copy "
                        "(yet: a page's copy is made a few seconds after it is saved).")
    try:
        local = await deps.objects.local_copy(row["object_path"])
    except FileNotFoundError:
        raise not_found("The item's archived copy is gone from the object store.") from None
    try:
        data = (await asyncio.to_thread(local.read_bytes))[:MAX_SNAPSHOT_BYTES + 65536]
    finally:
        local.unlink(missing_ok=True)
    context.note_results(1)
    stem = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in (row["title"] or "page"))[:80].strip("-")
    return data, f"{stem or 'page'}-archived.html", row
