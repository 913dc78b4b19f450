"""Folders: list with item counts (the caller's own and those shared with them, with the caller's role), create,
rename, delete (optionally with their owner's only-here items)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, exists, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store import items as item_store
from lev.store import tokens as token_store
from lev.store.members import OWNER
from lev.store.models import folders, item_folders, user_items, users
from lev.store.scope import Scope
from lev.store.sharing_models import folder_members


def _shape(row: Any, scope: Scope) -> dict[str, Any]:
    mine = row.user_id == scope.user_id
    out = {"id": str(row.id), "name": row.name, "item_count": int(row.item_count),
           "created_at": row.created_at.isoformat(), "role": OWNER if mine else row.role,
           "shared": row.id in scope.shared}
    if not mine:
        out["owner_email"] = row.owner_email
    return out


async def list_visible(session: AsyncSession, scope: Scope) -> list[dict[str, Any]]:
    """Folders in scope, each with the number of its items the caller can see."""
    count = (
        select(func.count())
        .select_from(item_folders.join(user_items, user_items.c.id == item_folders.c.item_id))
        .where(item_folders.c.folder_id == folders.c.id)
    )
    if scope.kb_only:
        count = count.where(user_items.c.in_kb.is_(True))
    cols = [folders.c.id, folders.c.name, folders.c.created_at, folders.c.user_id,
            count.scalar_subquery().label("item_count")]
    q = select(*cols).where(folders.c.user_id == scope.user_id)
    theirs = scope.shared_in_scope
    if theirs:  # folders shared with the caller: their role and their owner's email
        role = (select(folder_members.c.role).where(folder_members.c.folder_id == folders.c.id,
                                                    folder_members.c.user_id == scope.user_id).scalar_subquery())
        owner_email = select(users.c.email).where(users.c.id == folders.c.user_id).scalar_subquery()
        q = (select(*cols, role.label("role"), owner_email.label("owner_email"))
             .where((folders.c.user_id == scope.user_id) | folders.c.id.in_(sorted(theirs))))
    if scope.folder_ids is not None:
        q = q.where(folders.c.id.in_(scope.folder_ids))
    q = q.order_by(func.lower(folders.c.name), folders.c.id)
    return [_shape(r, scope) for r in await session.execute(q) if r.user_id == scope.user_id or r.role is not None]


async def create_folder(session: AsyncSession, user_id: uuid.UUID, name: str) -> dict[str, Any] | None:
    """Insert a folder named `name` (already validated); None when the user has a folder of that name."""
    folder_id = uuid.uuid4()
    try:
        async with session.begin_nested():
            row = (await session.execute(
                insert(folders).values(id=folder_id, user_id=user_id, name=name)
                .returning(folders.c.id, folders.c.name, folders.c.created_at)
            )).one()
    except IntegrityError:
        return None
    return {"id": str(row.id), "name": row.name, "item_count": 0, "created_at": row.created_at.isoformat(),
            "role": OWNER, "shared": False}


async def rename_folder(session: AsyncSession, scope: Scope, folder_id: uuid.UUID, name: str) -> dict[str, Any] | None:
    """Rename the user's folder (known to exist) to `name` (already validated) and return it with its item count;
    None when the user has another folder of that name."""
    try:
        async with session.begin_nested():
            await session.execute(update(folders).where(folders.c.id == folder_id, folders.c.user_id == scope.user_id)
                                  .values(name=name))
    except IntegrityError:
        return None
    return next(f for f in await list_visible(session, scope) if f["id"] == str(folder_id))


async def owned_ids(session: AsyncSession, user_id: uuid.UUID, ids: list[uuid.UUID], *,
                    lock: bool = False) -> set[uuid.UUID]:
    """The ids among `ids` that are the user's folders; with `lock`, they cannot be deleted until the transaction
    ends (a folder delete that committed first leaves it out: an insert referencing it never fails)."""
    q = select(folders.c.id).where(folders.c.user_id == user_id, folders.c.id.in_(ids))
    if lock:
        q = q.order_by(folders.c.id).with_for_update(read=True, key_share=True)
    return set((await session.execute(q)).scalars())


async def delete_folder(
    session: AsyncSession, scope: Scope, folder_id: uuid.UUID, cascade_items: bool,
    before_delete: item_store.BeforeDelete | None = None,
) -> dict[str, Any] | None:
    """Delete a folder (None when the user has no such folder); with cascade_items also the items whose only
    folder it is (`before_delete` sees their ids first, while they exist).

    Scoped tokens left with no folder are revoked (spec: token lifecycle).
    """
    row = (await session.execute(
        select(folders.c.id).where(folders.c.id == folder_id, folders.c.user_id == scope.user_id)
        .with_for_update()
    )).first()
    if row is None:
        return None
    # Locks in the order every writer takes them (store/contents.py `lock_with_items`): the folder, its
    # only-here items, the tokens scoped to it; the items' contents and the BM25 statistics row (deleting
    # contents) come last, so this never holds them while it waits for a row another delete holds.
    ids: list[uuid.UUID] = []
    if cascade_items:
        other = exists().where(item_folders.c.item_id == user_items.c.id, item_folders.c.folder_id != folder_id)
        here = exists().where(item_folders.c.item_id == user_items.c.id, item_folders.c.folder_id == folder_id)
        only_here = select(user_items.c.id).where(user_items.c.user_id == scope.user_id, here, ~other)
        locked = list((await session.execute(
            only_here.order_by(user_items.c.id).with_for_update(of=user_items))).scalars())
        if locked:  # a fresh look once they are locked: one filed elsewhere meanwhile stays
            ids = list((await session.execute(only_here.where(user_items.c.id.in_(locked)))).scalars())
    await token_store.lock_scoped_by_folder(session, folder_id)
    await token_store.revoke_emptied_by_folder_delete(session, folder_id)
    if before_delete is not None and ids:
        await before_delete(ids)
    await session.execute(delete(folders).where(folders.c.id == folder_id))
    deleted = await item_store.delete_many(session, ids)
    return {"id": str(folder_id), "deleted": True, "items_deleted": deleted}
