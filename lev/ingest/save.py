"""The save step: a planned item stored in one transaction (content, item, chunks, the upload's record, the
reserved quota), or a new item linked to the content someone already stored for the same URL. Each returns the
answer and the follow-up jobs, which the caller queues once the transaction has committed.

A content with a stored object (an upload, a downloaded file) belongs to one item; a content without one (a
page, a YouTube video) is shared by every user who adds the same canonical URL. A page captured in a user's
browser is that user's own content (an owner, no shared canonical URL): nobody else's ingest links to it, their
search never finds it, a server fetch never replaces it (the owner's URL ingest links to the capture), and
capturing it again moves the user's item onto the new capture.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal
from lev.core.errors import not_found, object_missing
from lev.highlights import service as highlights
from lev.ingest.followups import Followup, archiving, finishing, transforms
from lev.ingest.plan import Chunks, Plan
from lev.ingest.request import FileAt, Resolved
from lev.limits import quota
from lev.plumbing.deps import Deps
from lev.store import archives as archive_store
from lev.store import captures as capture_store
from lev.store import contents as content_store
from lev.store import items as item_store
from lev.store import lifecycle
from lev.store import sourcefiles as source_store
from lev.store import uploads as upload_store
from lev.tags.names import lenient
from lev.tags.service import tag_new_item
from lev.webhooks import events


@dataclass(frozen=True)
class Stored:
    """An ingest's answer; for a file kept by its path, what it did there (`change`: added, updated, unchanged)
    and the highlights an update found no words for (`lost`, deleted)."""

    phase: lifecycle.Phase
    content_id: uuid.UUID
    item_id: uuid.UUID
    folder_id: uuid.UUID | None
    file: FileAt | None = None
    change: str | None = None
    lost: tuple[dict[str, Any], ...] = ()

    def answer(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.phase.value, "content_id": str(self.content_id),
                               "user_item_id": str(self.item_id),
                               "folder_id": str(self.folder_id) if self.folder_id else None}
        if self.file is not None:
            out["source_file"] = {"path": self.file.path, "sha256": self.file.sha256, "change": self.change,
                                  "highlights_lost": [{"text": h["text"], "note": h["note"]} for h in self.lost]}
        return out


@dataclass(frozen=True)
class Saved:
    stored: Stored
    followups: list[Followup] = field(default_factory=list)


async def link_existing(deps: Deps, r: Resolved) -> Saved | None:
    """The item `r` stands for when its URL is stored already (no fetch, download or charge): the caller's own
    capture of the page, else a new item on the content someone stored; None otherwise (and always for a page
    being captured). A URL nobody stored costs one read, no transaction: the save's transaction links if it was
    stored meanwhile."""
    if r.canonical is None or r.kind == "page":
        return None
    async with deps.db.read_session() as s:
        mine = r.kind == "url" and await capture_store.has_owned(s, r.principal.user_id, r.canonical)
        if not mine and not await content_store.canonical_url_taken(s, r.canonical):
            return None
    async with deps.db.transaction() as s:
        if mine:
            captured = await _link_capture(s, r)
            if captured is not None:
                return captured
        return await _link(s, r, r.title)


async def _link_capture(s: AsyncSession, r: Resolved) -> Saved | None:
    """The caller's captured item of the URL, filed into the new-item folder: a server fetch never replaces what the
    user's browser saw."""
    assert r.canonical is not None
    folder_id = r.principal.new_item_folder
    if folder_id is not None and not await item_store.lock_writable_folder(s, r.principal.user_id, folder_id):
        raise not_found()
    found = await capture_store.lock_own_capture_item(s, r.principal.scope, r.canonical)
    if found is None:
        return None
    if folder_id is not None:
        await item_store.add_memberships(s, found["item_id"], [folder_id])
    await tag_new_item(s, r.principal.user_id, found["item_id"], list(r.tags), announce=True)
    phase = lifecycle.of_row(found["status"], found["transcription_status"]).phase
    return Saved(Stored(phase, found["content_id"], found["item_id"], folder_id))


async def _link(s: AsyncSession, r: Resolved, title: str | None) -> Saved | None:
    """In the caller's transaction: the new item on the content stored for `r.canonical`, with its transform when
    that content is ready (a pending one's finishing job transforms every item of it). None when there is none,
    or when it failed (it then gives up the URL for a fresh attempt)."""
    assert r.canonical is not None
    folder_id = r.principal.new_item_folder  # locked before the content: folders come first in every writer
    if folder_id is not None and not await item_store.lock_writable_folder(s, r.principal.user_id, folder_id):
        raise not_found()
    row = await content_store.by_canonical_url(s, r.canonical)
    if row is None:
        return None
    if row["status"] == lifecycle.Status.FAILED:
        await content_store.update_content(s, row["id"], canonical_url=None)
        return None
    state = lifecycle.of_content(row["kind"], row["status"])
    item_id = await _new_item(s, r.principal, content_id=row["id"], kind=row["kind"], title=title or row["title"],
                              url=r.url, in_kb=r.in_kb, auto_transform=r.auto_transform, state=state,
                              tags=r.tags)
    if state.status is lifecycle.Status.READY:
        await events.items_changed(s, "item.ready", item_ids=[item_id])
    ready = state.status is lifecycle.Status.READY and r.auto_transform
    return Saved(Stored(state.phase, row["id"], item_id, folder_id), transforms([item_id]) if ready else [])


def _created(plan: Plan) -> lifecycle.State:
    """The state a new item is created in: processing, also when its chunks were embedded in the request (it is
    indexed, and made ready, later in the same transaction), so `item.created` says processing and precedes
    `item.ready` (issue 51)."""
    return lifecycle.start(plan.kind, ready=False) if plan.state.status is lifecycle.Status.READY else plan.state


async def _new_item(s: AsyncSession, principal: Principal, *, state: lifecycle.State, tags: tuple[str, ...] = (),
                    **values: Any) -> uuid.UUID:
    item_id = await item_store.create_item(s, user_id=principal.user_id, folder_id=principal.new_item_folder,
                                           created_by=principal.token_id, state=state, **values)
    if item_id is None:  # the token's folder was deleted while the request ran
        raise not_found()
    await tag_new_item(s, principal.user_id, item_id, list(tags))
    await events.items_changed(s, "item.created", item_ids=[item_id])
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
    if source.owner_url is not None:
        return await _save_capture(deps, r, plan, chunks)
    if r.file is not None:
        return await _save_file(deps, r, plan, chunks, r.file)
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
        values = _content_values(plan)
        content_id = await content_store.create_content(s, canonical_url=source.canonical, **values)
        if content_id is None and source.path is None:  # the same page was stored meanwhile: link to it
            linked = await _link(s, r, r.title)
            if linked is not None:
                return linked
            content_id = await content_store.create_content(s, canonical_url=source.canonical, **values)
        if content_id is None:  # the same URL was stored meanwhile, but this object is ours: keep it unshared
            content_id = await content_store.create_content(s, canonical_url=None, **values)
        assert content_id is not None
        ready = plan.state.status is lifecycle.Status.READY
        item_id = await _new_item(s, principal, content_id=content_id, kind=plan.kind, title=r.title or plan.title,
                                  url=source.url, in_kb=r.in_kb, auto_transform=r.auto_transform,
                                  state=_created(plan),
                                  tags=with_document_tags(r.tags, plan.metadata))
        if source.upload:
            assert source.path is not None
            await upload_store.set_item(s, source.path, item_id)
        todo = await index_content(s, content_id, plan.title, chunks, plan.state) if ready else []
        archive = await _keep_page(s, content_id, source, plan.metadata.get("final_url"))
    stored = Stored(plan.state.phase, content_id, item_id, principal.new_item_folder)
    return Saved(stored, finishing(plan.job, content_id, principal.user_id) + transforms(todo) + archive)


async def kept_file(s: AsyncSession, user_id: uuid.UUID, at: FileAt) -> Stored | None:
    """The answer for a file whose path already made an item from the same bytes (`unchanged`), else None."""
    kept = await source_store.get(s, user_id, at.path)
    if kept is None or kept["sha256"] != at.sha256:
        return None
    item = await upload_store.item_state(s, kept["item_id"])
    if item is None:
        return None
    phase = lifecycle.of_row(item["status"], item["transcription_status"]).phase
    folder = await upload_store.first_folder(s, item["id"])
    return Stored(phase, item["content_id"], item["id"], folder, at, "unchanged")


def _content_values(plan: Plan) -> dict[str, Any]:
    source = plan.source
    return {"kind": plan.kind, "title": plan.title, "text": plan.text, "url": source.url, "metadata": plan.metadata,
            "status": plan.state.status, "mime": source.mime, "object_path": source.path, "size_bytes": source.size,
            "duration_sec": plan.duration, "transcript": plan.transcript, "outline": plan.outline.to_json()}


async def _save_file(deps: Deps, r: Resolved, plan: Plan, chunks: Chunks, at: FileAt) -> Saved:
    """An upload kept by its path, in one transaction: a new item (filed where the principal files), or the item
    the path made before moved onto the new content in place (same id; the old text, its chunks, its object and
    the item's outputs go; highlights move to their words, those without words are deleted and reported). The
    same bytes at the same path (sent twice at once) answer the item they made."""
    source, principal = plan.source, r.principal
    assert source.path is not None and source.upload
    async with deps.db.transaction() as s:
        await source_store.lock_path(s, principal.user_id, at.path)  # before any row lock
        if principal.new_item_folder is not None and not await item_store.lock_writable_folder(
                s, principal.user_id, principal.new_item_folder):
            raise not_found()  # folders are locked before items and contents in every writer
        row = await upload_store.get_upload(s, source.path, for_update=True)
        if row is None:
            raise object_missing()
        earlier = await finalized(s, principal, row)
        if earlier is not None:  # a concurrent finalize won
            return Saved(earlier)
        kept = await source_store.get(s, principal.user_id, at.path, lock=True)
        if kept is not None and kept["sha256"] == at.sha256:
            same = await kept_file(s, principal.user_id, at)
            assert same is not None
            return Saved(same)
        if plan.quota_seconds is not None:
            await quota.reserve(s, deps.settings, principal.user_id, principal.tier, plan.quota_seconds)
        content_id = await content_store.create_content(s, canonical_url=None, **_content_values(plan))
        assert content_id is not None
        lost: list[dict[str, Any]] = []
        ready = plan.state.status is lifecycle.Status.READY
        if kept is None:
            item_id = await _new_item(s, principal, content_id=content_id, kind=plan.kind, title=plan.title,
                                      url=None, in_kb=r.in_kb, auto_transform=r.auto_transform, state=plan.state,
                                      tags=with_document_tags(r.tags, plan.metadata))
        else:
            item_id = kept["item_id"]
            old = await upload_store.item_state(s, item_id)
            assert old is not None
            await capture_store.repoint_item(s, item_id, content_id, kind=plan.kind, title=plan.title, error=None,
                                             **plan.state.columns())
            await source_store.drop_content(s, old["content_id"])
            if ready:  # else the job that reads the file moves them (finish.finish_content)
                lost = await highlights.text_replaced(s, item_id, plan.text or "", plan.title, None)
        await upload_store.set_item(s, source.path, item_id)
        await source_store.record(s, principal.user_id, at.path, item_id, at.sha256, at.size)
        todo = await index_content(s, content_id, plan.title, chunks, plan.state) if ready else []
    stored = Stored(plan.state.phase, content_id, item_id, principal.new_item_folder, at,
                    "added" if kept is None else "updated", tuple(lost))
    return Saved(stored, finishing(plan.job, content_id, principal.user_id) + transforms(todo))


async def _save_capture(deps: Deps, r: Resolved, plan: Plan, chunks: Chunks) -> Saved:
    """A captured page as the caller's own content, in one transaction: a new item, or the item an earlier capture
    of the URL made moved onto the new content (the old content, its chunks and the item's outputs go, so a job
    still working on the old text finds nothing to finish)."""
    source, principal = plan.source, r.principal
    assert source.owner_url is not None and source.url is not None
    folder_id = principal.new_item_folder
    async with deps.db.transaction() as s:
        await capture_store.lock_url(s, principal.user_id, source.owner_url)  # before any row lock
        if folder_id is not None and not await item_store.lock_writable_folder(s, principal.user_id, folder_id):
            raise not_found()  # folders are locked before items and contents in every writer
        earlier = await capture_store.lock_own_capture_item(s, principal.scope, source.owner_url)
        content_id = await capture_store.create_owned(
            s, user_id=principal.user_id, owner_url=source.owner_url, url=source.url, title=plan.title,
            text=plan.text or "", metadata=plan.metadata, status=plan.state.status.value,
            outline=plan.outline.to_json())
        if earlier is None:
            item_id = await _new_item(s, principal, content_id=content_id, kind=plan.kind, title=plan.title,
                                      url=source.url, in_kb=r.in_kb, auto_transform=r.auto_transform,
                                      state=_created(plan), tags=r.tags)
        else:
            item_id = earlier["item_id"]
            await capture_store.repoint_item(s, item_id, content_id, url=source.url, title=plan.title, in_kb=r.in_kb,
                                             auto_transform=r.auto_transform, error=None, **plan.state.columns())
            await capture_store.delete_unreferenced(s, earlier["content_id"])
            await highlights.text_replaced(s, item_id, plan.text or "", plan.title, source.url)
            if folder_id is not None:
                await item_store.add_memberships(s, item_id, [folder_id])
            await tag_new_item(s, principal.user_id, item_id, list(r.tags), announce=True)
        ready = plan.state.status is lifecycle.Status.READY
        todo = await index_content(s, content_id, plan.title, chunks, plan.state) if ready else []
        archive = await _keep_page(s, content_id, source, plan.metadata.get("final_url"))
    stored = Stored(plan.state.phase, content_id, item_id, folder_id)
    return Saved(stored, finishing(plan.job, content_id, principal.user_id) + transforms(todo) + archive)


def with_document_tags(asked: tuple[str, ...], metadata: dict[str, Any]) -> tuple[str, ...]:
    """The tags asked for, then those a document names for itself (a Markdown file's front matter `tags:`, which its
    reader leaves in the metadata), cut to fit as an import's are."""
    named = metadata.get("tags")
    return (*asked, *lenient(named)) if isinstance(named, list) and named else asked


async def _keep_page(s: AsyncSession, content_id: uuid.UUID, source: Any, final_url: Any) -> list[Followup]:
    """A new content's page kept for its archived copy (its resources resolved against the URL it was served at,
    after redirects), and the job that makes it (none without a page)."""
    if source.page is None or source.url is None:
        return []
    url = final_url if isinstance(final_url, str) and final_url else source.url
    await archive_store.add_pending(s, content_id, url=url, source=source.page, charset=source.charset)
    return archiving(content_id)


async def index_content(s: AsyncSession, content_id: uuid.UUID, title: str | None, chunks: Chunks,
                        ready: lifecycle.State, *, content_values: dict[str, Any] | None = None) -> list[uuid.UUID]:
    """Store a content's chunks and vectors and put it and its items in the `ready` state (the lifecycle's: a new
    item's first state, or where a job's `advance` led); returns the items whose transform is to be queued once the
    transaction commits.

    The chunks go in last: their trigger locks the BM25 statistics row, which every writer takes last
    (store/contents.py `lock_with_items`), so no transaction waits for a row while it holds that one."""
    assert ready.status is lifecycle.Status.READY, ready
    await item_store.set_items_of_content(s, content_id, error=None, **ready.columns())
    await content_store.update_content(s, content_id, status=ready.status.value, error=None, **(content_values or {}))
    if chunks.indexed_chars is not None:
        await content_store.mark_truncated(s, content_id, indexed_chars=chunks.indexed_chars, chunks=len(chunks.bodies))
    await content_store.add_chunks(s, content_id, title, chunks.bodies, chunks.vectors, chunks.times,
                                   chunks.locations)
    await events.items_changed(s, "item.ready", content_id=content_id)
    return await item_store.auto_transform_items(s, content_id)


async def record_attachments(deps: Deps, content_id: uuid.UUID, metadata: dict[str, Any]) -> None:
    """An e-mail's metadata once its attachments are items: each one's file name and item (or why it failed)."""
    async with deps.db.transaction() as s:
        await content_store.update_content(s, content_id, metadata=metadata)


async def save_failed(deps: Deps, principal: Principal, *, kind: str, url: str, title: str | None, error: str,
                      in_kb: bool) -> uuid.UUID:
    """A link that could not be ingested, kept as a failed item with the reason (imports: a dead link is an item
    that says why, not a lost line). Its content is never shared, so a later ingest of the URL fetches afresh."""
    failed = lifecycle.refused(kind)
    async with deps.db.transaction() as s:
        content_id = await content_store.create_content(s, kind=kind, title=title, text=None, url=url,
                                                        status=failed.status)
        assert content_id is not None
        await content_store.update_content(s, content_id, error=error[:1000])
        item_id = await _new_item(s, principal, content_id=content_id, kind=kind, title=title or url, url=url,
                                  in_kb=in_kb, auto_transform=False, state=failed)
        await item_store.set_items_of_content(s, content_id, error=error[:1000])
        await events.items_changed(s, "item.failed", item_ids=[item_id])
    return item_id
