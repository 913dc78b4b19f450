"""Shared folders: who may reach a folder and with which role (owner, editor, viewer), its members, the handing
over of a leaving member's items, and the invitations sent by email."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, func, insert, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.models import feeds, folders, item_folders, outputs, user_items, users
from lev.store.sharing_models import folder_invitations, folder_members

OWNER, EDITOR, VIEWER = "owner", "editor", "viewer"
ROLES = (EDITOR, VIEWER)  # what an invitation or a member may be given; the owner is the folder's user


def shared_columns(user_col: ColumnElement[Any]) -> tuple[Any, ...]:
    """Correlated columns for a credential's lookup (no extra round trip): the folders shared with the user, the
    user's own folders that have members (their union is `Scope.shared`), and the people of those folders (their
    owners and members: everyone whose items a shared folder can hold, `Scope.peers`)."""
    member_of_q = select(folder_members.c.folder_id).where(folder_members.c.user_id == user_col)
    member_of = select(func.array_agg(folder_members.c.folder_id)).where(folder_members.c.user_id == user_col)
    owned_shared = (select(func.array_agg(func.distinct(folder_members.c.folder_id)))
                    .select_from(folder_members.join(folders, folders.c.id == folder_members.c.folder_id))
                    .where(folders.c.user_id == user_col))
    others = folder_members.alias("others")
    co_members = (select(func.array_agg(func.distinct(others.c.user_id)))
                  .where(others.c.folder_id.in_(member_of_q)
                         | others.c.folder_id.in_(select(folders.c.id).where(folders.c.user_id == user_col))))
    owners = select(func.array_agg(func.distinct(folders.c.user_id))).where(folders.c.id.in_(member_of_q))
    return (member_of.scalar_subquery().label("member_of"), owned_shared.scalar_subquery().label("owned_shared"),
            co_members.scalar_subquery().label("co_members"), owners.scalar_subquery().label("co_owners"))


def shared_ids(row: dict[str, Any]) -> frozenset[uuid.UUID]:
    """`Scope.shared` from a row that carries the `shared_columns`."""
    return frozenset(row.get("member_of") or ()) | frozenset(row.get("owned_shared") or ())


def peer_ids(row: dict[str, Any]) -> frozenset[uuid.UUID]:
    """`Scope.peers` from a row that carries the `shared_columns` (and the user's own `user_id`)."""
    return (frozenset(row.get("co_members") or ()) | frozenset(row.get("co_owners") or ())) - {row.get("user_id")}


async def roles(session: AsyncSession, user_id: uuid.UUID, ids: list[uuid.UUID], *,
                lock: bool = False) -> dict[uuid.UUID, str]:
    """The user's role on each of the folders among `ids` they can reach (owner, editor, viewer). With `lock`, none
    of them can be deleted, and none of the memberships ended, until the transaction ends."""
    if not ids:
        return {}
    own = select(folders.c.id).where(folders.c.id.in_(ids), folders.c.user_id == user_id)
    member = (select(folder_members.c.folder_id, folder_members.c.role)
              .where(folder_members.c.folder_id.in_(ids), folder_members.c.user_id == user_id))
    if lock:  # folders first, then memberships: the order of every writer
        reached = (select(folders.c.id).where(folders.c.id.in_(ids)).where(
            (folders.c.user_id == user_id) | folders.c.id.in_(member.with_only_columns(folder_members.c.folder_id)))
            .order_by(folders.c.id).with_for_update(read=True, key_share=True))
        await session.execute(reached)
        own = own.with_for_update(read=True, key_share=True)
        member = member.order_by(folder_members.c.folder_id).with_for_update(read=True, key_share=True)
    found = {fid: OWNER for fid in (await session.execute(own)).scalars()}
    for fid, role in (await session.execute(member)).all():
        found.setdefault(fid, role)
    return found


async def role_of(session: AsyncSession, user_id: uuid.UUID, folder_id: uuid.UUID, *, lock: bool = False) -> str | None:
    return (await roles(session, user_id, [folder_id], lock=lock)).get(folder_id)


async def lock_writable(session: AsyncSession, user_id: uuid.UUID, folder_id: uuid.UUID) -> bool:
    """Whether the user may file items into the folder (its owner or an editor); the folder and the membership then
    last until the transaction ends."""
    return await role_of(session, user_id, folder_id, lock=True) in (OWNER, EDITOR)


async def saver_email(session: AsyncSession, item_id: uuid.UUID, user_id: uuid.UUID) -> str | None:
    """Who saved an item the user sees through a shared folder (None for the user's own item)."""
    q = (select(users.c.email).join(user_items, user_items.c.user_id == users.c.id)
         .where(user_items.c.id == item_id, user_items.c.user_id != user_id))
    return (await session.execute(q)).scalar()


async def folder(session: AsyncSession, folder_id: uuid.UUID) -> dict[str, Any] | None:
    """The folder with its owner's id and email."""
    row = (await session.execute(
        select(folders.c.id, folders.c.name, folders.c.user_id, users.c.email.label("owner_email"))
        .join(users, users.c.id == folders.c.user_id).where(folders.c.id == folder_id))).first()
    return dict(row._mapping) if row else None


async def lock_folder_members(session: AsyncSession, folder_id: uuid.UUID) -> None:
    """Serialise changes to the folder's members (any folder: the caller has checked its right to change them); never
    blocks the readers and filers, who share-lock it."""
    await session.execute(select(folders.c.id).where(folders.c.id == folder_id)
                          .with_for_update(key_share=True))  # FOR NO KEY UPDATE


async def list_members(session: AsyncSession, folder_id: uuid.UUID) -> list[dict[str, Any]]:
    """The owner first, then the members by when they joined."""
    owner = (select(folders.c.user_id, users.c.email, literal(OWNER).label("role"),
                    folders.c.created_at.label("added_at"))
             .join(users, users.c.id == folders.c.user_id).where(folders.c.id == folder_id))
    rows = list((await session.execute(owner)).all())
    rows += (await session.execute(
        select(folder_members.c.user_id, users.c.email, folder_members.c.role, folder_members.c.added_at)
        .join(users, users.c.id == folder_members.c.user_id).where(folder_members.c.folder_id == folder_id)
        .order_by(folder_members.c.added_at, users.c.email))).all()
    return [{"user_id": str(r.user_id), "email": r.email, "role": r.role, "added_at": r.added_at.isoformat()}
            for r in rows]


async def add_member(session: AsyncSession, folder_id: uuid.UUID, user_id: uuid.UUID, role: str) -> None:
    await session.execute(pg_insert(folder_members).values(folder_id=folder_id, user_id=user_id, role=role)
                          .on_conflict_do_nothing())


async def set_role(session: AsyncSession, folder_id: uuid.UUID, user_id: uuid.UUID, role: str) -> bool:
    res = await session.execute(update(folder_members).where(folder_members.c.folder_id == folder_id,
                                                             folder_members.c.user_id == user_id).values(role=role))
    return bool(res.rowcount)  # type: ignore[attr-defined]


async def remove_member(session: AsyncSession, folder_id: uuid.UUID, user_id: uuid.UUID) -> bool:
    """End a membership (waits for a filer holding it); False when there was none."""
    res = await session.execute(delete(folder_members).where(folder_members.c.folder_id == folder_id,
                                                             folder_members.c.user_id == user_id))
    return bool(res.rowcount)  # type: ignore[attr-defined]


_COMPUTED = tuple(c.name for c in user_items.c if c.computed is not None)  # PostgreSQL writes these


async def hand_over(session: AsyncSession, folder_id: uuid.UUID, member_id: uuid.UUID, owner_id: uuid.UUID) -> int:
    """The items a leaving member filed into the folder stay in it as the folder owner's: the owner's own item on
    the same content (a new one when they have none: same text, chunks and vectors, outputs copied) takes the
    member's place in the folder, and the member's item leaves the folder (it stays in the member's library).
    Returns how many items were handed over."""
    theirs = (select(user_items).where(user_items.c.user_id == member_id, user_items.c.id.in_(
        select(item_folders.c.item_id).where(item_folders.c.folder_id == folder_id)))
        .order_by(user_items.c.id).with_for_update(of=user_items))
    rows = [dict(r._mapping) for r in await session.execute(theirs)]
    for item in rows:
        filed_at = (await session.execute(select(item_folders.c.created_at).where(
            item_folders.c.item_id == item["id"], item_folders.c.folder_id == folder_id))).scalar()
        mine = (await session.execute(select(user_items.c.id).where(
            user_items.c.user_id == owner_id, user_items.c.content_id == item["content_id"])
            .order_by(user_items.c.created_at).limit(1))).scalar()
        if mine is None:
            mine = uuid.uuid4()
            await session.execute(insert(user_items).values(
                {**{k: v for k, v in item.items() if k not in ("id", "user_id", "created_by_token", *_COMPUTED)},
                 "id": mine, "user_id": owner_id, "created_by_token": None, "auto_transform": False}))
            await session.execute(insert(outputs).from_select(
                ["id", "item_id", "kind", "content", "generator", "created_at"],
                select(func.gen_random_uuid(), literal(mine), outputs.c.kind, outputs.c.content, outputs.c.generator,
                       outputs.c.created_at).where(outputs.c.item_id == item["id"])))
        await session.execute(pg_insert(item_folders).values(item_id=mine, folder_id=folder_id, created_at=filed_at)
                              .on_conflict_do_nothing())
        await session.execute(delete(item_folders).where(item_folders.c.item_id == item["id"],
                                                         item_folders.c.folder_id == folder_id))
    await session.execute(update(feeds).where(feeds.c.user_id == member_id, feeds.c.folder_id == folder_id)
                          .values(folder_id=None))
    return len(rows)


async def unfile_feeds(session: AsyncSession, folder_id: uuid.UUID, user_id: uuid.UUID) -> None:
    """A member who can no longer add to the folder: their feeds that filled it fill their library instead."""
    await session.execute(update(feeds).where(feeds.c.user_id == user_id, feeds.c.folder_id == folder_id)
                          .values(folder_id=None))


def _invitation(row: Any) -> dict[str, Any]:
    m = row._mapping
    out = {"id": str(m["id"]), "folder_id": str(m["folder_id"]), "email": m["email"], "role": m["role"],
           "status": m["status"], "created_at": m["created_at"].isoformat()}
    if "folder_name" in m:
        out.update(folder_name=m["folder_name"], invited_by=m["invited_by_email"])
    return out


async def create_invitation(session: AsyncSession, folder_id: uuid.UUID, email: str, role: str,
                            invited_by: uuid.UUID, code_digest: bytes,
                            code_expires_at: datetime) -> dict[str, Any] | None:
    """A pending invitation accepted by the link whose digest is `code_digest`; None when one is already pending
    for that email."""
    exists_q = select(folder_invitations.c.id).where(
        folder_invitations.c.folder_id == folder_id, func.lower(folder_invitations.c.email) == email.lower(),
        folder_invitations.c.status == "pending")
    if (await session.execute(exists_q)).first() is not None:
        return None
    row = (await session.execute(insert(folder_invitations).values(
        id=uuid.uuid4(), folder_id=folder_id, email=email, role=role, invited_by=invited_by, status="pending",
        code_digest=code_digest, code_expires_at=code_expires_at)
        .returning(folder_invitations))).one()
    return _invitation(row)


async def set_invitation_code(session: AsyncSession, folder_id: uuid.UUID, invitation_id: uuid.UUID,
                              code_digest: bytes, code_expires_at: datetime) -> dict[str, Any] | None:
    """A new link for a pending invitation of the folder (the old one stops working); None when there is none."""
    row = (await session.execute(update(folder_invitations).where(
        folder_invitations.c.id == invitation_id, folder_invitations.c.folder_id == folder_id,
        folder_invitations.c.status == "pending").values(code_digest=code_digest, code_expires_at=code_expires_at)
        .returning(folder_invitations))).first()
    return _invitation(row) if row else None


async def is_member_email(session: AsyncSession, folder_id: uuid.UUID, email: str) -> bool:
    q = (select(folder_members.c.user_id).join(users, users.c.id == folder_members.c.user_id)
         .where(folder_members.c.folder_id == folder_id, func.lower(users.c.email) == email.lower()))
    return (await session.execute(q)).first() is not None


def _addressed(email: str) -> Any:
    inviter = users.alias("inviter")
    return (select(folder_invitations, folders.c.name.label("folder_name"), inviter.c.email.label("invited_by_email"))
            .join(folders, folders.c.id == folder_invitations.c.folder_id)
            .join(inviter, inviter.c.id == folder_invitations.c.invited_by)
            .where(func.lower(folder_invitations.c.email) == email.strip().lower()))


async def invitations_for(session: AsyncSession, email: str) -> list[dict[str, Any]]:
    """The pending invitations addressed to an email, newest first."""
    q = (_addressed(email).where(folder_invitations.c.status == "pending")
         .order_by(folder_invitations.c.created_at.desc(), folder_invitations.c.id))
    return [_invitation(r) for r in await session.execute(q)]


async def pending_of_folder(session: AsyncSession, folder_id: uuid.UUID) -> list[dict[str, Any]]:
    q = (select(folder_invitations).where(folder_invitations.c.folder_id == folder_id,
                                          folder_invitations.c.status == "pending")
         .order_by(folder_invitations.c.created_at, folder_invitations.c.id))
    return [_invitation(r) for r in await session.execute(q)]


async def take_invitation(session: AsyncSession, invitation_id: uuid.UUID, email: str) -> dict[str, Any] | None:
    """The pending invitation addressed to `email`, locked (one answer wins); None otherwise."""
    q = (select(folder_invitations).where(folder_invitations.c.id == invitation_id,
                                          func.lower(folder_invitations.c.email) == email.strip().lower(),
                                          folder_invitations.c.status == "pending").with_for_update())
    row = (await session.execute(q)).first()
    return dict(row._mapping) if row else None


async def invitation_by_code(session: AsyncSession, code_digest: bytes, *, lock: bool = False) -> dict[str, Any] | None:
    """The pending invitation whose unexpired link has this digest, with its folder's name and inviter (locked with
    `lock`: one answer wins); None otherwise."""
    inviter = users.alias("inviter")
    q = (select(folder_invitations, folders.c.name.label("folder_name"), inviter.c.email.label("invited_by_email"),
                folders.c.user_id.label("owner_id"))
         .join(folders, folders.c.id == folder_invitations.c.folder_id)
         .join(inviter, inviter.c.id == folder_invitations.c.invited_by)
         .where(folder_invitations.c.code_digest == code_digest, folder_invitations.c.status == "pending",
                folder_invitations.c.code_expires_at > func.now()))
    if lock:
        q = q.with_for_update(of=folder_invitations)
    row = (await session.execute(q)).first()
    return dict(row._mapping) if row else None


async def answer_invitation(session: AsyncSession, invitation_id: uuid.UUID, status: str) -> None:
    await session.execute(update(folder_invitations).where(folder_invitations.c.id == invitation_id)
                          .values(status=status, responded_at=func.now(), code_digest=None))


async def delete_invitation(session: AsyncSession, folder_id: uuid.UUID, invitation_id: uuid.UUID) -> bool:
    """Withdraw a pending invitation of the folder."""
    res = await session.execute(delete(folder_invitations).where(
        folder_invitations.c.id == invitation_id, folder_invitations.c.folder_id == folder_id,
        folder_invitations.c.status == "pending"))
    return bool(res.rowcount)  # type: ignore[attr-defined]
