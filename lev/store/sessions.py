"""Browser sessions: create, resolve (with the user's email and tier), lock a live one, end one or all of a user's,
purge expired.

Only the SHA-256 of the cookie value is stored; the caller hashes it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.members import shared_columns
from lev.store.models import sessions, users


async def create_session(session: AsyncSession, id_hash: bytes, user_id: uuid.UUID, csrf_token: str,
                 expires_at: datetime) -> None:
    await session.execute(insert(sessions).values(id_hash=id_hash, user_id=user_id, csrf_token=csrf_token,
                                                  expires_at=expires_at))


async def lookup_session(session: AsyncSession, id_hash: bytes) -> dict[str, Any] | None:
    """The live session with its user's email, tier and shared folders (`members.shared_ids`), or None (unknown
    or expired)."""
    q = (
        select(sessions.c.user_id, sessions.c.csrf_token, sessions.c.expires_at, users.c.email, users.c.tier,
               *shared_columns(sessions.c.user_id))
        .join(users, users.c.id == sessions.c.user_id)
        .where(sessions.c.id_hash == id_hash, sessions.c.expires_at > func.now())
    )
    row = (await session.execute(q)).first()
    return dict(row._mapping) if row else None


async def end_session(session: AsyncSession, id_hash: bytes) -> None:
    await session.execute(delete(sessions).where(sessions.c.id_hash == id_hash))


async def lock_live(session: AsyncSession, id_hash: bytes) -> bool:
    """Lock the session (FOR SHARE) until the transaction ends; False when it is gone or expired. Whatever is written
    under it then commits before a password change can end the session (its delete waits for the lock)."""
    q = (select(sessions.c.id_hash).where(sessions.c.id_hash == id_hash, sessions.c.expires_at > func.now())
         .with_for_update(read=True))
    return (await session.execute(q)).first() is not None


async def end_all(session: AsyncSession, user_id: uuid.UUID) -> int:
    """End every session of the user (after a password change)."""
    res = await session.execute(delete(sessions).where(sessions.c.user_id == user_id))
    return int(res.rowcount)  # type: ignore[attr-defined]


async def purge_expired(session: AsyncSession) -> int:
    res = await session.execute(delete(sessions).where(sessions.c.expires_at <= func.now()))
    return int(res.rowcount)  # type: ignore[attr-defined]
