"""The monthly transcription quota: minutes per user per calendar month, capped by tier.

Usage lives in `usage_monthly` (seconds, keyed by `lev.clock.month_key()`). A transcription is
checked before it is queued (used + still-pending + this one must fit under the cap) and charged
with the measured duration only when it succeeds; refused or failed work costs nothing.
"""

from __future__ import annotations

import math
import uuid

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev import clock
from lev.errors import ApiError
from lev.settings import get_settings
from store.models import contents, usage_monthly, user_items

RESOURCE = "transcription_minutes"


def cap_minutes(tier: str) -> int:
    """The tier's monthly minutes from settings (`LEV_TIER_<TIER>_MINUTES`); -1 is unlimited, unknown is 0."""
    value = getattr(get_settings(), f"tier_{tier}_minutes", 0)
    return int(value) if isinstance(value, int) else 0


async def used_seconds(session: AsyncSession, user_id: uuid.UUID, month: str | None = None) -> float:
    row = (await session.execute(
        select(usage_monthly.c.transcription_seconds)
        .where(usage_monthly.c.user_id == user_id, usage_monthly.c.month == (month or clock.month_key()))
    )).scalar_one_or_none()
    return float(row or 0.0)


async def pending_seconds(session: AsyncSession, user_id: uuid.UUID) -> float:
    """Durations of this user's transcriptions that are queued or running (not yet charged)."""
    total = (await session.execute(
        select(func.coalesce(func.sum(contents.c.duration_sec), 0.0))
        .select_from(user_items.join(contents, contents.c.id == user_items.c.content_id))
        .where(user_items.c.user_id == user_id, user_items.c.transcription_status == "pending")
    )).scalar_one()
    return float(total or 0.0)


async def check(session: AsyncSession, user_id: uuid.UUID, tier: str, seconds: float) -> None:
    """402 quota_exceeded unless `seconds` more transcription fit in this month's cap."""
    cap = cap_minutes(tier)
    if cap < 0:
        return
    used = await used_seconds(session, user_id) + await pending_seconds(session, user_id)
    if used + max(seconds, 0.0) > cap * 60:
        left = max(0.0, cap * 60 - used)
        raise ApiError(
            402, "quota_exceeded",
            f"This transcription needs {math.ceil(seconds / 60)} min but only {math.floor(left / 60)} of the "
            f"{cap} monthly transcription minutes of the {tier} tier are left; the quota resets when the month "
            "rolls over.",
            resource=RESOURCE, tier=tier, cap_per_month=cap,
        )


async def charge(session: AsyncSession, user_id: uuid.UUID, seconds: float) -> None:
    """Add `seconds` of transcription to this month's usage."""
    if seconds <= 0:
        return
    stmt = pg_insert(usage_monthly).values(user_id=user_id, month=clock.month_key(),
                                           transcription_seconds=seconds)
    await session.execute(stmt.on_conflict_do_update(
        index_elements=["user_id", "month"],
        set_={"transcription_seconds": usage_monthly.c.transcription_seconds + seconds},
    ))
