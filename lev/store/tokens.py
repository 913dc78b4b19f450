"""Tokens: minting, lookup by hash, listing and revocation."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.members import shared_columns
from lev.store.models import folders, token_folders, token_monthly_writes, tokens, users


async def lookup_token(session: AsyncSession, digest: bytes) -> dict[str, Any] | None:
    """The token row with its owner's tier, its folder ids and its user's shared folders (`members.shared_ids`), by
    SHA-256 digest."""
    folder_ids = (
        select(func.array_agg(token_folders.c.folder_id))
        .where(token_folders.c.token_id == tokens.c.id)
        .scalar_subquery()
    )
    q = (
        select(tokens, users.c.tier, folder_ids.label("folder_ids"), *shared_columns(tokens.c.user_id))
        .join(users, users.c.id == tokens.c.user_id)
        .where(tokens.c.token_hash == digest)
    )
    row = (await session.execute(q)).first()
    return dict(row._mapping) if row else None


async def count_active(session: AsyncSession, user_id: uuid.UUID) -> int:
    q = select(func.count()).select_from(tokens).where(
        tokens.c.user_id == user_id, tokens.c.revoked_at.is_(None), tokens.c.expires_at > func.now()
    )
    return int((await session.execute(q)).scalar_one())


async def insert_token(
    session: AsyncSession, *, user_id: uuid.UUID, name: str, digest: bytes, prefix: str, write: bool,
    folder_ids: list[uuid.UUID], kb_only: bool, write_cap: int, expires_at: datetime, kind: str = "token",
    client_id: str | None = None, resource: str | None = None, access_expires_at: datetime | None = None,
) -> uuid.UUID:
    """Store a minted token (its hash and display prefix, never the secret); no folders = whole library. An OAuth
    grant (kind 'oauth') also names its client, its resource and when its current access token expires."""
    token_id = uuid.uuid4()
    await session.execute(insert(tokens).values(
        id=token_id, user_id=user_id, name=name, token_hash=digest, prefix=prefix,
        capabilities=["read", "write"] if write else ["read"], is_unscoped=not folder_ids, kb_only=kb_only,
        write_cap=write_cap, expires_at=expires_at, kind=kind, client_id=client_id, resource=resource,
        access_expires_at=access_expires_at,
    ))
    if folder_ids:
        await session.execute(insert(token_folders), [{"token_id": token_id, "folder_id": f} for f in folder_ids])
    return token_id


async def list_for_user(session: AsyncSession, user_id: uuid.UUID) -> list[dict[str, Any]]:
    folder_ids = (
        select(func.array_agg(token_folders.c.folder_id))
        .where(token_folders.c.token_id == tokens.c.id)
        .scalar_subquery()
    )
    q = (
        select(tokens.c.id, tokens.c.name, tokens.c.prefix, tokens.c.capabilities, tokens.c.is_unscoped,
               tokens.c.kb_only, tokens.c.write_cap, tokens.c.expires_at, tokens.c.revoked_at,
               tokens.c.last_used_at, tokens.c.created_at, tokens.c.kind, tokens.c.client_id,
               folder_ids.label("folder_ids"))
        .where(tokens.c.user_id == user_id)
        .order_by(tokens.c.created_at)
    )
    return [dict(r._mapping) for r in (await session.execute(q))]


async def replace_access(session: AsyncSession, token_id: uuid.UUID, digest: bytes, prefix: str,
                         access_expires_at: datetime) -> None:
    """Give an OAuth grant a new access token (refresh rotation): the previous one stops working at once."""
    await session.execute(update(tokens).where(tokens.c.id == token_id).values(
        token_hash=digest, prefix=prefix, access_expires_at=access_expires_at))


async def revoke_token(session: AsyncSession, token_id: uuid.UUID) -> bool:
    res = await session.execute(
        update(tokens).where(tokens.c.id == token_id, tokens.c.revoked_at.is_(None)).values(revoked_at=func.now())
    )
    return bool(res.rowcount)  # type: ignore[attr-defined]


async def revoke_all(session: AsyncSession, user_id: uuid.UUID) -> int:
    """Revoke every live token of the user. The rows are locked in id order first, the order the activity writer
    (`touch_last_used`) and folder deletes take: an UPDATE alone locks them in table order and can deadlock."""
    live = (await session.execute(
        select(tokens.c.id).where(tokens.c.user_id == user_id, tokens.c.revoked_at.is_(None))
        .order_by(tokens.c.id).with_for_update()
    )).scalars().all()
    if not live:
        return 0
    await session.execute(update(tokens).where(tokens.c.id.in_(live)).values(revoked_at=func.now()))
    return len(live)


async def lock_scoped_by_folder(session: AsyncSession, folder_id: uuid.UUID) -> None:
    """Lock the tokens scoped to `folder_id` until the transaction ends.

    Two folder deletes touching one token then run one after the other, so the second sees the first's removal
    and the last-folder revocation cannot be raced.
    """
    await session.execute(
        select(tokens.c.id)
        .where(tokens.c.id.in_(select(token_folders.c.token_id).where(token_folders.c.folder_id == folder_id)))
        .order_by(tokens.c.id).with_for_update()
    )


async def revoke_emptied_by_folder_delete(session: AsyncSession, folder_id: uuid.UUID) -> int:
    """Revoke scoped tokens whose only remaining in-scope folder is `folder_id` (about to be deleted)."""
    others = select(token_folders.c.token_id).where(
        token_folders.c.token_id == tokens.c.id, token_folders.c.folder_id != folder_id
    )
    in_scope = select(token_folders.c.token_id).where(
        token_folders.c.token_id == tokens.c.id, token_folders.c.folder_id == folder_id
    )
    res = await session.execute(
        update(tokens)
        .where(and_(tokens.c.is_unscoped.is_(False), tokens.c.revoked_at.is_(None),
                    in_scope.exists(), ~others.exists()))
        .values(revoked_at=func.now())
    )
    return int(res.rowcount)  # type: ignore[attr-defined]


async def unscope_folder(session: AsyncSession, folder_id: uuid.UUID, user_id: uuid.UUID) -> int:
    """A member leaves a shared folder: their tokens scoped to it lose it, and those left with no folder are revoked
    (the rule of a folder delete); returns how many were revoked."""
    mine = select(tokens.c.id).where(tokens.c.user_id == user_id)
    await session.execute(
        select(tokens.c.id).where(tokens.c.user_id == user_id, tokens.c.id.in_(
            select(token_folders.c.token_id).where(token_folders.c.folder_id == folder_id)))
        .order_by(tokens.c.id).with_for_update())
    others = select(token_folders.c.token_id).where(
        token_folders.c.token_id == tokens.c.id, token_folders.c.folder_id != folder_id)
    in_scope = select(token_folders.c.token_id).where(
        token_folders.c.token_id == tokens.c.id, token_folders.c.folder_id == folder_id)
    res = await session.execute(
        update(tokens).where(tokens.c.user_id == user_id, tokens.c.is_unscoped.is_(False),
                             tokens.c.revoked_at.is_(None), in_scope.exists(), ~others.exists())
        .values(revoked_at=func.now()))
    await session.execute(delete(token_folders).where(token_folders.c.folder_id == folder_id,
                                                      token_folders.c.token_id.in_(mine)))
    return int(res.rowcount)  # type: ignore[attr-defined]


COUNT_WRITE_SQL = (
    "INSERT INTO token_monthly_writes (token_id, month, writes) VALUES (%(token_id)s, %(month)s, 1) "
    "ON CONFLICT (token_id, month) DO UPDATE SET writes = token_monthly_writes.writes + 1 "
    "WHERE token_monthly_writes.writes < %(cap)s RETURNING writes")


async def count_write(conn: psycopg.AsyncConnection[Any], token_id: uuid.UUID, month: str, cap: int) -> bool:
    """Count one write of the token in `month` unless `cap` are already counted; False when refused.

    One atomic statement, so concurrent requests can never together pass the cap. It runs on the driver's
    connection (`Database.driver`): it is on every write's path.
    """
    cur = await conn.execute(COUNT_WRITE_SQL, {"token_id": token_id, "month": month, "cap": cap})
    return await cur.fetchone() is not None


async def writes_in_month(session: AsyncSession, token_ids: list[uuid.UUID], month: str) -> dict[uuid.UUID, int]:
    """Writes counted for each token in `month` (tokens without any are absent)."""
    rows = await session.execute(
        select(token_monthly_writes.c.token_id, token_monthly_writes.c.writes)
        .where(token_monthly_writes.c.token_id.in_(token_ids), token_monthly_writes.c.month == month)
    )
    return {r.token_id: int(r.writes) for r in rows}


async def touch_last_used(session: AsyncSession, seen: dict[uuid.UUID, datetime]) -> None:
    """Record last_used_at for many tokens at once (batched by the activity writer)."""
    for token_id, at in sorted(seen.items()):  # one lock order with folder deletes (lock_scoped_by_folder)
        await session.execute(
            update(tokens).where(tokens.c.id == token_id,
                                 (tokens.c.last_used_at.is_(None)) | (tokens.c.last_used_at < at))
            .values(last_used_at=at)
        )


async def describe_token(session: AsyncSession, token_id: uuid.UUID) -> dict[str, Any] | None:
    """A token's own record for introspection: expiry, creation and its scope folders with their names
    (None once the token is gone)."""
    row = (await session.execute(
        select(tokens.c.expires_at, tokens.c.created_at).where(tokens.c.id == token_id)
    )).one_or_none()
    if row is None:
        return None
    scope = (await session.execute(
        select(folders.c.id, folders.c.name)
        .join(token_folders, token_folders.c.folder_id == folders.c.id)
        .where(token_folders.c.token_id == token_id)
        .order_by(func.lower(folders.c.name), folders.c.id)
    )).all()
    return {"expires_at": row.expires_at, "created_at": row.created_at,
            "folders": [{"id": str(f.id), "name": f.name} for f in scope]}
