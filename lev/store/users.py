"""Users: creation, lookup, password and tier."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

from argon2 import PasswordHasher
from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.models import tokens, users
from lev.store.sharing_models import email_verifications

_hasher = PasswordHasher()
_FIRST_ACCOUNT_LOCK = 0x4C455631  # pg_advisory_xact_lock key: sign-ups on an empty instance take turns


async def any_yet(session: AsyncSession) -> bool:
    """Whether the instance has a user (a plain read: `none_yet` is the one that decides who is first)."""
    return (await session.execute(select(users.c.id).limit(1))).first() is not None


async def none_yet(session: AsyncSession) -> bool:
    """True when the instance has no user at all; concurrent callers wait for each other's transaction, so only
    one of them can see an empty table and then create the first user."""
    await session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _FIRST_ACCOUNT_LOCK})
    return (await session.execute(select(users.c.id).limit(1))).first() is None


async def create_user(session: AsyncSession, email: str, tier: str = "free",
                      password: str | None = None, *, verified: bool = False) -> uuid.UUID | None:
    """A new user's id (`verified`: the address is known to be theirs); None when the email (any case) is taken."""
    user_id = uuid.uuid4()
    values: dict[str, Any] = {"id": user_id, "email": email.strip(), "tier": tier,
                              "email_verified_at": func.now() if verified else None}
    if password:
        values["password_hash"] = await asyncio.to_thread(_hasher.hash, password)  # 0.3 s of CPU: off the loop
    try:
        async with session.begin_nested():
            await session.execute(insert(users).values(**values))
    except IntegrityError:
        return None
    return user_id


async def by_email(session: AsyncSession, email: str) -> dict[str, Any] | None:
    row = (await session.execute(select(users).where(func.lower(users.c.email) == email.strip().lower()))).first()
    return dict(row._mapping) if row else None


async def by_id(session: AsyncSession, user_id: uuid.UUID) -> dict[str, Any] | None:
    row = (await session.execute(select(users).where(users.c.id == user_id))).first()
    return dict(row._mapping) if row else None


async def list_all(session: AsyncSession) -> list[dict[str, Any]]:
    """Every user with the number of active tokens, oldest first (for `lev user list`)."""
    active = (select(func.count()).select_from(tokens)
              .where(tokens.c.user_id == users.c.id, tokens.c.revoked_at.is_(None),
                     tokens.c.expires_at > func.now())
              .scalar_subquery())
    rows = await session.execute(select(users.c.id, users.c.email, users.c.tier, users.c.created_at,
                                        active.label("active_tokens")).order_by(users.c.created_at, users.c.email))
    return [dict(r._mapping) for r in rows]


async def set_password(session: AsyncSession, user_id: uuid.UUID, password: str) -> None:
    hashed = await asyncio.to_thread(_hasher.hash, password)
    await session.execute(update(users).where(users.c.id == user_id).values(password_hash=hashed))


async def set_tier(session: AsyncSession, user_id: uuid.UUID, tier: str) -> None:
    await session.execute(update(users).where(users.c.id == user_id).values(tier=tier))


def hash_password(password: str) -> str:
    """An argon2id hash (argon2-cffi's default type)."""
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    if not password_hash:
        return False
    try:
        return _hasher.verify(password_hash, password)
    except Exception:
        return False


async def verify_email(session: AsyncSession, user_id: uuid.UUID, email: str) -> bool:
    """Record that the user's address is theirs, when it is still `email` (any case); whether it is verified now."""
    row = (await session.execute(
        update(users).where(users.c.id == user_id, func.lower(users.c.email) == email.strip().lower())
        .values(email_verified_at=func.coalesce(users.c.email_verified_at, func.now())).returning(users.c.id))).first()
    return row is not None


async def add_email_code(session: AsyncSession, user_id: uuid.UUID, email: str, code_digest: bytes,
                         expires_at: datetime) -> None:
    """A verification mail's link (its digest) for the user's address."""
    await session.execute(insert(email_verifications).values(code_digest=code_digest, user_id=user_id, email=email,
                                                             created_at=func.now(), expires_at=expires_at))


async def email_code_sent_since(session: AsyncSession, user_id: uuid.UUID, seconds: float) -> bool:
    """Whether a verification mail went to the user within the last `seconds`."""
    q = select(email_verifications.c.user_id).where(
        email_verifications.c.user_id == user_id,
        email_verifications.c.created_at > func.now() - func.make_interval(0, 0, 0, 0, 0, 0, seconds)).limit(1)
    return (await session.execute(q)).first() is not None


async def take_email_code(session: AsyncSession, code_digest: bytes) -> dict[str, Any] | None:
    """The unexpired verification link with this digest, used up (deleted); None otherwise."""
    row = (await session.execute(delete(email_verifications).where(
        email_verifications.c.code_digest == code_digest).returning(email_verifications))).first()
    if row is None:
        return None
    found = dict(row._mapping)
    expired = (await session.execute(select(func.now() > found["expires_at"]))).scalar()
    return None if expired else found
