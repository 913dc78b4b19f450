"""Monthly usage per user (`usage_monthly`): transcription seconds used, pending and charged."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.lifecycle import Transcription
from lev.store.models import contents, usage_monthly, user_items


async def lock_user(session: AsyncSession, user_id: uuid.UUID) -> None:
    """Serialise quota decisions of one user until the end of this transaction."""
    await session.execute(text("SELECT pg_advisory_xact_lock(:k)"),
                          {"k": int.from_bytes(user_id.bytes[:8], "big", signed=True)})


async def used_seconds(session: AsyncSession, user_id: uuid.UUID, month: str) -> float:
    """Transcription seconds charged to the user in `month` (YYYY-MM)."""
    row = (await session.execute(
        select(usage_monthly.c.transcription_seconds)
        .where(usage_monthly.c.user_id == user_id, usage_monthly.c.month == month)
    )).scalar_one_or_none()
    return float(row or 0.0)


async def pending_seconds(session: AsyncSession, user_id: uuid.UUID) -> float:
    """Durations of this user's transcriptions that are queued or running (not yet charged)."""
    total = (await session.execute(
        select(func.coalesce(func.sum(contents.c.duration_sec), 0.0))
        .select_from(user_items.join(contents, contents.c.id == user_items.c.content_id))
        .where(user_items.c.user_id == user_id, user_items.c.transcription_status == Transcription.PENDING.value)
    )).scalar_one()
    return float(total or 0.0)


async def add_seconds(session: AsyncSession, user_id: uuid.UUID, month: str, seconds: float) -> None:
    """Add `seconds` of transcription to the user's usage in `month`."""
    stmt = pg_insert(usage_monthly).values(user_id=user_id, month=month, transcription_seconds=seconds)
    await session.execute(stmt.on_conflict_do_update(
        index_elements=["user_id", "month"],
        set_={"transcription_seconds": usage_monthly.c.transcription_seconds + seconds},
    ))
