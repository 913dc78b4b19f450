"""User items: creating them, their state, visibility under a scope, listing, reading, deleting, folder
memberships."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Text,
    and_,
    cast,
    delete,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, aggregate_order_by
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store import members
from lev.store.lifecycle import State
from lev.store.models import contents, item_folders, object_deletions, outputs, user_items
from lev.store.reading_models import archives, item_tags, tags
from lev.store.scope import Scope


async def create_item(
    session: AsyncSession, *, user_id: uuid.UUID, content_id: uuid.UUID, kind: str, title: str | None,
    url: str | None, in_kb: bool, auto_transform: bool, state: State, folder_id: uuid.UUID | None = None,
    created_by: uuid.UUID | None = None,
) -> uuid.UUID | None:
    """A new user item (filed into `folder_id`); None when that folder was deleted while the request ran."""
    if folder_id is not None and not await lock_writable_folder(session, user_id, folder_id):
        return None
    item_id = uuid.uuid4()
    await session.execute(insert(user_items).values(
        id=item_id, user_id=user_id, content_id=content_id, kind=kind, title=title, url=url, in_kb=in_kb,
        archived=False, auto_transform=auto_transform, created_by_token=created_by, **state.columns(),
    ))
    if folder_id is not None:
        await session.execute(insert(item_folders).values(item_id=item_id, folder_id=folder_id))
    return item_id


async def lock_writable_folder(session: AsyncSession, user_id: uuid.UUID, folder_id: uuid.UUID) -> bool:
    """Whether the user may file into the folder (their own, or shared with them as an editor); the folder and the
    membership then last until the transaction ends."""
    return await members.lock_writable(session, user_id, folder_id)


async def set_items_of_content(session: AsyncSession, content_id: uuid.UUID, **values: Any) -> None:
    """Set columns (state, error) of every item of a content: their state follows the content's."""
    await session.execute(update(user_items).where(user_items.c.content_id == content_id)
                          .values(updated_at=func.now(), **values))


async def auto_transform_items(session: AsyncSession, content_id: uuid.UUID) -> list[uuid.UUID]:
    """The content's items that asked for AI transforms."""
    q = select(user_items.c.id).where(user_items.c.content_id == content_id, user_items.c.auto_transform.is_(True))
    return list((await session.execute(q)).scalars())


def visible(scope: Scope) -> ColumnElement[bool]:
    """The SQL predicate 'this user item is visible to the caller' (user, folder scope, shared folders, kb_only):
    the caller's own items (in the scope's folders, for a folder-scoped token), and every item filed into a
    shared folder the scope reaches, whoever saved it. The one place that decides what a caller sees."""
    conds: list[ColumnElement[bool]] = [user_items.c.user_id == scope.user_id]
    if scope.folder_ids is not None:
        in_scope = exists().where(
            item_folders.c.item_id == user_items.c.id,
            item_folders.c.folder_id.in_(scope.folder_ids) if scope.folder_ids else literal(False),
        )
        if scope.token_id is None:
            conds.append(in_scope)
        else:
            own_unfiled = and_(user_items.c.created_by_token == scope.token_id,
                               ~exists().where(item_folders.c.item_id == user_items.c.id))
            conds.append(or_(in_scope, own_unfiled))
    shared = scope.shared_in_scope
    if shared:  # bounded by the people of the shared folders, so an index on user_id still answers it
        conds = [user_items.c.user_id.in_(sorted(scope.peers | {scope.user_id})), or_(and_(*conds), in_folders(shared))]
    if scope.kb_only:
        conds.append(user_items.c.in_kb.is_(True))
    return and_(*conds)


def tagged(keys: tuple[str, ...]) -> ColumnElement[bool]:
    """'This user item carries each of these tags, or a tag nested in it' (keys: `store.tags.key_of`)."""
    return user_items.c.tag_keys.op("@>")(cast(literal(sorted(set(keys)), ARRAY(Text)), ARRAY(Text)))


def in_folders(folder_ids: frozenset[uuid.UUID]) -> ColumnElement[bool]:
    """'This user item is filed into one of these folders'."""
    return exists().where(item_folders.c.item_id == user_items.c.id, item_folders.c.folder_id.in_(sorted(folder_ids)))


def owned(scope: Scope) -> ColumnElement[bool]:
    """Visible and the caller's own: what the caller may change or delete (an item is its saver's, wherever it is
    filed)."""
    return and_(visible(scope), user_items.c.user_id == scope.user_id)


def _folder_ids(scope: Scope) -> Any:
    """The item's folders that the caller can see: the scope's, or (whole library) the caller's own folders and
    the shared ones; another member's private folders never show."""
    q = select(func.array_agg(item_folders.c.folder_id)).where(item_folders.c.item_id == user_items.c.id)
    if scope.folder_ids is not None:
        q = q.where(item_folders.c.folder_id.in_(scope.folder_ids) if scope.folder_ids else literal(False))
    elif scope.shared:
        q = q.where(or_(user_items.c.user_id == scope.user_id, item_folders.c.folder_id.in_(sorted(scope.shared))))
    return q.scalar_subquery()


_SUMMARY_COLS = (
    user_items.c.id, user_items.c.content_id, user_items.c.kind, user_items.c.title, user_items.c.url,
    user_items.c.in_kb, user_items.c.archived, user_items.c.status, user_items.c.transcription_status,
    user_items.c.error, user_items.c.created_at, user_items.c.updated_at, user_items.c.read_at, user_items.c.progress,
)


def tag_names_sql() -> Any:
    """The names of the tags of `user_items.id`, in key order (a correlated subquery; an empty array for none)."""
    return (select(func.coalesce(func.array_agg(aggregate_order_by(tags.c.name, tags.c.key)),
                                 literal([], ARRAY(Text))))
            .select_from(item_tags.join(tags, tags.c.id == item_tags.c.tag_id))
            .where(item_tags.c.item_id == user_items.c.id).scalar_subquery())


def _summary_cols() -> tuple[Any, ...]:
    """What every read of an item selects: its columns, its visible folders (added by the caller) and its tags."""
    return (*_SUMMARY_COLS, tag_names_sql().label("tags"))


def shape_summary(row: Any) -> dict[str, Any]:
    m = row._mapping
    return {
        "id": str(m["id"]),
        "content_id": str(m["content_id"]),
        "kind": m["kind"],
        "title": m["title"],
        "url": m["url"],
        "in_kb": m["in_kb"],
        "archived": m["archived"],
        "status": m["status"],
        "transcription_status": m["transcription_status"],
        "error": m["error"],
        "folder_ids": sorted(str(f) for f in (m["folder_ids"] or [])),
        "tags": list(m["tags"] or []),
        "read_at": m["read_at"].isoformat() if m["read_at"] else None,
        "progress": round(float(m["progress"]), 4),
        "created_at": m["created_at"].isoformat(),
        "updated_at": m["updated_at"].isoformat(),
    }


async def list_items(
    session: AsyncSession,
    scope: Scope,
    *,
    folder_id: uuid.UUID | None = None,
    archived: bool | None = None,
    in_kb: bool | None = None,
    unfiled: bool | None = None,
    page: int = 1,
    per_page: int = 50,
    url: tuple[str, str] | None = None,
    tag_keys: tuple[str, ...] = (),
    read: bool | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """A page of visible items, newest first, and the total. `url` is (URL, its canonical form): the items of that
    page, by their own URL or by their content's canonical URL (shared, or the caller's browser capture).
    `tag_keys`: only items carrying each of these tags (or a tag nested in it); `read`: only read or unread ones."""
    conds: list[ColumnElement[bool]] = [visible(scope)]
    if tag_keys:
        conds.append(tagged(tag_keys))
    if read is not None:
        conds.append(user_items.c.read_at.isnot(None) if read else user_items.c.read_at.is_(None))
    if url is not None:
        conds.append(or_(user_items.c.url == url[0], exists().where(
            contents.c.id == user_items.c.content_id,
            or_(contents.c.canonical_url == url[1],
                and_(contents.c.owner_id == scope.user_id, contents.c.owner_url == url[1])))))
    if folder_id is not None:
        conds.append(exists().where(item_folders.c.item_id == user_items.c.id, item_folders.c.folder_id == folder_id))
    if unfiled is not None:
        filed = exists().where(item_folders.c.item_id == user_items.c.id)
        conds.append(~filed if unfiled else filed)
    if archived is not None:
        conds.append(user_items.c.archived.is_(archived))
    if in_kb is not None:
        conds.append(user_items.c.in_kb.is_(in_kb))
    where = and_(*conds)
    count = select(func.count()).select_from(user_items).where(where)
    q = (
        select(*_summary_cols(), _folder_ids(scope).label("folder_ids"), count.scalar_subquery().label("total"))
        .where(where)
        .order_by(user_items.c.created_at.desc(), user_items.c.id.desc())
        .limit(per_page)
        .offset((page - 1) * per_page)
    )
    rows = (await session.execute(q)).all()  # the total rides along (computed once), saving a round trip
    if rows:
        return [shape_summary(r) for r in rows], int(rows[0].total)
    return [], int((await session.execute(count)).scalar_one())


async def recent(session: AsyncSession, scope: Scope, limit: int) -> list[dict[str, Any]]:
    items, _ = await list_items(session, scope, page=1, per_page=limit)
    return items


async def get_visible(session: AsyncSession, scope: Scope, item_id: uuid.UUID) -> dict[str, Any] | None:
    """The full item (content text, metadata, transcript, outputs, memberships), or None when not visible."""
    q = (
        select(*_summary_cols(), _folder_ids(scope).label("folder_ids"), contents.c.text, contents.c.metadata,
               user_items.c.metadata.label("item_metadata"), contents.c.transcript, contents.c.mime,
               contents.c.size_bytes, contents.c.duration_sec,
               *(c.label(f"archive_{c.name}") for c in (archives.c.status, archives.c.saved_at,
                                                         archives.c.size_bytes, archives.c.resources,
                                                         archives.c.skipped, archives.c.error)))
        .join(contents, contents.c.id == user_items.c.content_id)
        .outerjoin(archives, archives.c.content_id == user_items.c.content_id)
        .where(user_items.c.id == item_id, visible(scope))
    )
    row = (await session.execute(q)).first()
    if row is None:
        return None
    item = shape_summary(row)
    item["archive"] = _archive(row._mapping)
    m = row._mapping
    metadata = {**(m["metadata"] or {}), **(m["item_metadata"] or {})}  # the user's own (tags) over the content's
    for key in ("mime", "size_bytes", "duration_sec"):
        if m[key] is not None:
            metadata.setdefault(key, m[key])
    outs = await session.execute(
        select(outputs.c.id, outputs.c.kind, outputs.c.content, outputs.c.generator, outputs.c.created_at)
        .where(outputs.c.item_id == item_id).order_by(outputs.c.created_at, outputs.c.kind)
    )
    item.update({
        "text": m["text"],
        "metadata": metadata,
        "transcript": m["transcript"],
        "outputs": [
            {"id": str(o.id), "kind": o.kind, "content": o.content, "generator": o.generator,
             "created_at": o.created_at.isoformat()}
            for o in outs
        ],
        "folders": item["folder_ids"],
    })
    return item


CHANGEABLE = ("title", "in_kb", "archived", "read_at", "progress")  # an item's own fields, as item.updated names them


def _archive(m: Any) -> dict[str, Any] | None:
    """An item's `archive`: its content's archived copy (state, when saved, size, resources kept and left out)."""
    if m["archive_status"] is None:
        return None
    saved = m["archive_saved_at"]
    return {"status": m["archive_status"], "saved_at": saved.isoformat() if saved else None,
            "size_bytes": m["archive_size_bytes"], "resources": m["archive_resources"],
            "skipped": len(m["archive_skipped"] or []), "error": m["archive_error"]}


async def update_own(session: AsyncSession, scope: Scope, item_id: uuid.UUID,
                     changes: dict[str, Any]) -> tuple[dict[str, Any], list[str]] | None:
    """Set title / in_kb / archived / read (read_at: when it was first marked read, null when unread) / progress on
    the caller's own visible item; its summary and the fields whose value changed, or None when it is not the
    caller's to change."""
    q = (select(*(user_items.c[c] for c in CHANGEABLE)).where(user_items.c.id == item_id, owned(scope))
         .with_for_update(key_share=True, of=user_items))
    before = (await session.execute(q)).first()
    if before is None:
        return None
    values = {k: v for k, v in changes.items() if k in ("title", "in_kb", "archived", "progress")}
    if "read" in changes:
        values["read_at"] = func.coalesce(user_items.c.read_at, func.now()) if changes["read"] else None
    if values:
        await session.execute(update(user_items).where(user_items.c.id == item_id)
                              .values(**values, updated_at=func.now()))
    row = (await session.execute(
        select(*_summary_cols(), _folder_ids(scope).label("folder_ids")).where(user_items.c.id == item_id)
    )).one()
    after = row._mapping
    changed = [c for c in CHANGEABLE if after[c] != before._mapping[c]]
    return shape_summary(row), changed


async def is_visible(session: AsyncSession, scope: Scope, item_id: uuid.UUID, *, lock: bool = False,
                     own: bool = False) -> bool:
    """Whether the item is visible (with `own`, and the caller's); with `lock`, it also cannot be deleted until the
    transaction ends (a delete that committed first makes this False, never a foreign-key error on a later insert)."""
    q = select(user_items.c.id).where(user_items.c.id == item_id, owned(scope) if own else visible(scope))
    if lock:
        q = q.with_for_update(read=True, key_share=True, of=user_items)
    return (await session.execute(q)).first() is not None


async def delete_many(session: AsyncSession, ids: list[uuid.UUID]) -> int:
    """Delete user items (memberships and outputs cascade), then contents no one references any more.

    Stored objects of deleted contents are queued for the background drain.
    """
    if not ids:
        return 0
    rows = (await session.execute(
        delete(user_items).where(user_items.c.id.in_(ids)).returning(user_items.c.content_id)
    )).scalars().all()
    content_ids = sorted(set(rows))
    if content_ids:
        # Lock first, so the NOT EXISTS below sees items another transaction added to these contents meanwhile
        # (each statement takes a new snapshot): shared contents are never deleted under a new item.
        await session.execute(select(contents.c.id).where(contents.c.id.in_(content_ids))
                              .order_by(contents.c.id).with_for_update())
        orphaned = (await session.execute(
            delete(contents)
            .where(contents.c.id.in_(content_ids),
                   ~exists().where(user_items.c.content_id == contents.c.id))
            .returning(contents.c.object_path)
        )).scalars().all()
        paths = [p for p in orphaned if p]
        if paths:
            await session.execute(
                pg_insert(object_deletions).values([{"path": p, "attempts": 0} for p in paths])
                .on_conflict_do_nothing()
            )
    return len(rows)


BeforeDelete = Callable[[list[uuid.UUID]], Awaitable[None]]


async def delete_visible(session: AsyncSession, scope: Scope, item_ids: list[uuid.UUID],
                         before_delete: BeforeDelete | None = None) -> list[uuid.UUID]:
    """Delete the given items that the caller can see and owns; returns the ids deleted. `before_delete` sees the
    ids once they are locked, while the items still exist (the item.deleted events)."""
    found = list((await session.execute(
        select(user_items.c.id).where(user_items.c.id.in_(item_ids), owned(scope))
        .order_by(user_items.c.id).with_for_update(of=user_items)
    )).scalars())
    if before_delete is not None and found:
        await before_delete(found)
    await delete_many(session, found)
    return found


async def add_memberships(session: AsyncSession, item_id: uuid.UUID, folder_ids: list[uuid.UUID]) -> None:
    await session.execute(
        pg_insert(item_folders).values([{"item_id": item_id, "folder_id": f} for f in folder_ids])
        .on_conflict_do_nothing()
    )


async def remove_membership(session: AsyncSession, item_id: uuid.UUID, folder_id: uuid.UUID) -> bool:
    res = await session.execute(
        delete(item_folders).where(item_folders.c.item_id == item_id, item_folders.c.folder_id == folder_id)
    )
    return bool(res.rowcount)  # type: ignore[attr-defined]


async def visible_folder_ids(session: AsyncSession, scope: Scope, item_id: uuid.UUID) -> list[str]:
    """The item's folders the caller can see (`_folder_ids`)."""
    q = select(_folder_ids(scope)).select_from(user_items).where(user_items.c.id == item_id)
    return sorted(str(f) for f in (await session.execute(q)).scalar() or [])



async def stored_object(session: AsyncSession, scope: Scope, item_id: uuid.UUID) -> dict[str, Any] | None:
    """The stored file behind a visible item (`object_path`, `mime`, `kind`); None when the item is not visible
    or has no file (pages, texts, YouTube videos)."""
    row = (await session.execute(
        select(contents.c.object_path, contents.c.mime, user_items.c.kind)
        .join(contents, contents.c.id == user_items.c.content_id)
        .where(user_items.c.id == item_id, visible(scope), contents.c.object_path.isnot(None))
    )).first()
    return dict(row._mapping) if row else None


async def lock_own(session: AsyncSession, scope: Scope, item_id: uuid.UUID) -> bool:
    """Whether the item is visible and the caller's own; it is then locked (FOR NO KEY UPDATE) until the transaction
    ends: one writer of an item's tags or reading state at a time."""
    q = select(user_items.c.id).where(user_items.c.id == item_id, owned(scope)).with_for_update(key_share=True,
                                                                                              of=user_items)
    return (await session.execute(q)).first() is not None
