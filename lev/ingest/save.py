"""The save step: a planned item stored in one transaction (content, item, chunks, the upload's record, the
reserved quota), or a new item linked to the content someone already stored for the same URL. Each returns the
answer and the follow-up jobs, which the caller queues once the transaction has committed.

A content with a stored object (an upload, a downloaded file) belongs to one item; a content without one (a
page, a YouTube video) is shared by every user who adds the same canonical URL.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal
from lev.core.errors import not_found, object_missing
from lev.ingest.deps import Deps
from lev.ingest.followups import Followup, finishing, transforms
from lev.ingest.plan import Chunks, Plan
from lev.ingest.request import Resolved
from lev.limits import quota
from store import contents as content_store
from store import items as item_store
from store import lifecycle
from store import uploads as upload_store


@dataclass(frozen=True)
class Stored:
    """An ingest's answer."""

    phase: lifecycle.Phase
    content_id: uuid.UUID
    item_id: uuid.UUID
    folder_id: uuid.UUID | None

    def answer(self) -> dict[str, Any]:
        return {"status": self.phase.value, "content_id": str(self.content_id), "user_item_id": str(self.item_id),
                "folder_id": str(self.folder_id) if self.folder_id else None}


@dataclass(frozen=True)
class Saved:
    stored: Stored
    followups: list[Followup] = field(default_factory=list)


async def link_existing(deps: Deps, r: Resolved) -> Saved | None:
    """A new item on the content someone already stored for `r`'s URL (no fetch, download or charge), or None. A
    URL nobody stored costs one read, no transaction: the save's transaction links if it was stored meanwhile."""
    if r.canonical is None:
        return None
    async with deps.db.read_session() as s:
        if not await content_store.canonical_url_taken(s, r.canonical):
            return None
    async with deps.db.transaction() as s:
        return await _link(s, r, r.title)


async def _link(s: AsyncSession, r: Resolved, title: str | None) -> Saved | None:
    """In the caller's transaction: the new item on the content stored for `r.canonical`, with its transform when
    that content is ready (a pending one's finishing job transforms every item of it). None when there is none,
    or when it failed (it then gives up the URL for a fresh attempt)."""
    assert r.canonical is not None
    folder_id = r.principal.new_item_folder  # locked before the content: folders come first in every writer
    if folder_id is not None and not await item_store.lock_folder(s, r.principal.user_id, folder_id):
        raise not_found()
    row = await content_store.by_canonical_url(s, r.canonical)
    if row is None:
        return None
    if row["status"] == lifecycle.Status.FAILED:
        await content_store.update_content(s, row["id"], canonical_url=None)
        return None
    state = lifecycle.of_content(row["kind"], row["status"])
    item_id = await _new_item(s, r.principal, content_id=row["id"], kind=row["kind"], title=title or row["title"],
                              url=r.url, in_kb=r.in_kb, auto_transform=r.auto_transform, state=state)
    ready = state.status is lifecycle.Status.READY and r.auto_transform
    return Saved(Stored(state.phase, row["id"], item_id, folder_id), transforms([item_id]) if ready else [])


async def _new_item(s: AsyncSession, principal: Principal, *, state: lifecycle.State, **values: Any) -> uuid.UUID:
    item_id = await item_store.create_item(s, user_id=principal.user_id, folder_id=principal.new_item_folder,
                                           created_by=principal.token_id, status=state.status.value,
                                           transcription_status=state.transcription.value, **values)
    if item_id is None:  # the token's folder was deleted while the request ran
        raise not_found()
    return item_id


async def finalized(s: AsyncSession, principal: Principal, row: dict[str, Any] | None) -> Stored | None:
    """The answer of an upload's earlier finalize, for a retried one (None when there is none)."""
    if row is None or row["item_id"] is None or row["user_id"] != principal.user_id:
        return None
    item = await upload_store.item_state(s, row["item_id"])
    if item is None:
        return None
    folder = await upload_store.first_folder(s, item["id"])
    phase = lifecycle.of_row(item["status"], item["transcription_status"]).phase
    return Stored(phase, item["content_id"], item["id"], folder)


async def save(deps: Deps, r: Resolved, plan: Plan, chunks: Chunks) -> Saved:
    """Store the content, its item and (when ready) its chunks in one transaction; idempotent per upload path. A
    URL stored by someone else meanwhile is linked instead, inside the same transaction."""
    source, principal = plan.source, r.principal
    async with deps.db.transaction() as s:
        if source.upload:
            assert source.path is not None
            row = await upload_store.get_upload(s, source.path, for_update=True)
            if row is None:
                raise object_missing()
            earlier = await finalized(s, principal, row)
            if earlier is not None:  # a concurrent finalize won
                return Saved(earlier)
        if plan.quota_seconds is not None:
            await quota.reserve(s, deps.settings, principal.user_id, principal.tier, plan.quota_seconds)
        values: dict[str, Any] = {
            "kind": plan.kind, "title": plan.title, "text": plan.text, "url": source.url, "metadata": plan.metadata,
            "status": plan.state.status.value, "mime": source.mime, "object_path": source.path,
            "size_bytes": source.size, "duration_sec": plan.duration, "transcript": plan.transcript}
        content_id = await content_store.create_content(s, canonical_url=source.canonical, **values)
        if content_id is None and source.path is None:  # the same page was stored meanwhile: link to it
            linked = await _link(s, r, plan.title)
            if linked is not None:
                return linked
            content_id = await content_store.create_content(s, canonical_url=source.canonical, **values)
        if content_id is None:  # the same URL was stored meanwhile, but this object is ours: keep it unshared
            content_id = await content_store.create_content(s, canonical_url=None, **values)
        assert content_id is not None
        item_id = await _new_item(s, principal, content_id=content_id, kind=plan.kind, title=plan.title,
                                  url=source.url, in_kb=r.in_kb, auto_transform=r.auto_transform, state=plan.state)
        if source.upload:
            assert source.path is not None
            await upload_store.set_item(s, source.path, item_id)
        ready = plan.state.status is lifecycle.Status.READY
        todo = await index_content(s, content_id, plan.title, chunks) if ready else []
    stored = Stored(plan.state.phase, content_id, item_id, principal.new_item_folder)
    return Saved(stored, finishing(plan.job, content_id, principal.user_id) + transforms(todo))


async def index_content(s: AsyncSession, content_id: uuid.UUID, title: str | None, chunks: Chunks, *,
                        content_values: dict[str, Any] | None = None,
                        item_values: dict[str, Any] | None = None) -> list[uuid.UUID]:
    """Store a content's chunks and vectors and mark it and its items ready; returns the items whose transform
    is to be queued once the transaction commits.

    The chunks go in last: their trigger locks the BM25 statistics row, which every writer takes last
    (store/contents.py `lock_with_items`), so no transaction waits for a row while it holds that one."""
    ready = lifecycle.Status.READY.value
    await item_store.set_items_of_content(s, content_id, **{"status": ready, "error": None, **(item_values or {})})
    await content_store.update_content(s, content_id, status=ready, error=None, **(content_values or {}))
    await content_store.add_chunks(s, content_id, title, chunks.bodies, chunks.vectors, chunks.times)
    return await item_store.auto_transform_items(s, content_id)


async def save_failed(deps: Deps, principal: Principal, *, kind: str, url: str, title: str | None, error: str,
                      in_kb: bool) -> uuid.UUID:
    """A link that could not be ingested, kept as a failed item with the reason (imports: a dead link is an item
    that says why, not a lost line). Its content is never shared, so a later ingest of the URL fetches afresh."""
    failed = lifecycle.State(lifecycle.Status.FAILED, lifecycle.Transcription.NOT_REQUIRED)
    async with deps.db.transaction() as s:
        content_id = await content_store.create_content(s, kind=kind, title=title, text=None, url=url,
                                                        status=failed.status.value)
        assert content_id is not None
        await content_store.update_content(s, content_id, error=error[:1000])
        item_id = await _new_item(s, principal, content_id=content_id, kind=kind, title=title or url, url=url,
                                  in_kb=in_kb, auto_transform=False, state=failed)
        await item_store.set_items_of_content(s, content_id, error=error[:1000])
    return item_id
