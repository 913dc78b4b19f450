"""The monthly transcription quota: minutes per user per calendar month, capped by tier.

Usage lives in `usage_monthly` (seconds, keyed by `lev.core.clock.month_key()`; queries in `store.usage`). A
transcription is checked before it is queued (used + still-pending + this one must fit under the cap) and
charged with the measured duration only when it succeeds; refused or failed work costs nothing.
"""

from __future__ import annotations

import math
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from lev.core import clock
from lev.core.errors import quota_exceeded
from lev.core.settings import Settings
from lev.limits.tiers import Tiers
from lev.store import usage

RESOURCE = "transcription_minutes"


async def used_seconds(session: AsyncSession, user_id: uuid.UUID) -> float:
    """Transcription seconds charged to the user this month."""
    return await usage.used_seconds(session, user_id, clock.month_key())


async def check(session: AsyncSession, settings: Settings, user_id: uuid.UUID, tier: str, seconds: float) -> None:
    """402 quota_exceeded unless `seconds` more transcription fit in this month's cap."""
    cap = Tiers.from_settings(settings).minute_cap(tier)
    if cap < 0:
        return
    used = await used_seconds(session, user_id) + await usage.pending_seconds(session, user_id)
    if used + max(seconds, 0.0) > cap * 60:
        left = max(0.0, cap * 60 - used)
        raise quota_exceeded(
            f"This transcription needs {math.ceil(seconds / 60)} min but only {math.floor(left / 60)} of the "
            f"{cap} monthly transcription minutes of the {tier} tier are left; the quota resets when the month "
            "rolls over.",
            resource=RESOURCE, tier=tier, cap_per_month=cap,
        )


async def reserve(session: AsyncSession, settings: Settings, user_id: uuid.UUID, tier: str, seconds: float) -> None:
    """`check` under a per-user lock held to the end of the transaction that stores the pending work."""
    await usage.lock_user(session, user_id)
    await check(session, settings, user_id, tier, seconds)


async def charge(session: AsyncSession, user_id: uuid.UUID, seconds: float) -> None:
    """Add `seconds` of transcription to this month's usage."""
    if seconds > 0:
        await usage.add_seconds(session, user_id, clock.month_key(), seconds)
