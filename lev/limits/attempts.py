"""Attempt budgets: at most N attempts per key in a moving window, reserved atomically before the work they guard
(a password check) and handed back when the attempt turns out not to count (a successful sign-in).

`limits` (the per-token budgets) can consume a hit atomically but cannot give one back, and testing first and
hitting after the work lets a parallel burst through: every attempt of the burst tests before any has hit. Here a
reservation is a member of a Redis sorted set scored by its time; adding it, dropping the expired ones and counting
run in one MULTI, so of any number of concurrent reservations at most N see a count within the budget. Keys hold
SHA-256 digests, never the email or address itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItem

from lev.core.errors import rate_limited

KEY_PREFIX = "lev:attempts:"


def window_text(item: RateLimitItem) -> str:
    unit = item.GRANULARITY.name
    return unit if item.multiples == 1 else f"{item.multiples} {unit}s"


@dataclass(frozen=True)
class Reservation:
    """One reserved attempt; `release` hands it back (the attempt does not count)."""

    redis: Any
    key: str
    member: str

    async def release(self) -> None:
        await self.redis.zrem(self.key, self.member)


class AttemptBudget:
    """`item.amount` attempts per `item`'s window for each key of one kind (e.g. failed sign-ins per email)."""

    def __init__(self, redis: Any, kind: str, item: RateLimitItem, refusal: str) -> None:
        self.redis = redis
        self.kind = kind
        self.item = item
        self.refusal = refusal  # the 429's message, with {retry} for the seconds to wait

    def _key(self, value: str) -> str:
        # the budget is part of the key (as in `limits`): servers configured differently keep apart counts
        budget = f"{self.item.amount}/{self.item.multiples}{self.item.GRANULARITY.name}"
        return f"{KEY_PREFIX}{self.kind}:{budget}:{hashlib.sha256(value.encode()).hexdigest()}"

    async def reserve(self, value: str) -> Reservation:
        """Reserve one attempt for `value`, or raise 429 rate_limited (with Retry-After) when its budget is used up.
        A Redis failure propagates (the caller's request becomes 503 unavailable: never an unlimited check)."""
        key, member = self._key(value), uuid.uuid4().hex
        window_ms = int(self.item.get_expiry() * 1000)
        now_ms = int(time.time() * 1000)
        async with self.redis.pipeline(transaction=True) as tx:
            tx.zremrangebyscore(key, "-inf", now_ms - window_ms)
            tx.zadd(key, {member: now_ms})
            tx.zcard(key)
            tx.zrange(key, 0, 0, withscores=True)
            tx.pexpire(key, window_ms)
            _, _, count, oldest, _ = await tx.execute()
        if count <= self.item.amount:
            return Reservation(self.redis, key, member)
        await self.redis.zrem(key, member)
        first = float(oldest[0][1]) if oldest else float(now_ms)
        retry = max(1, math.ceil((first + window_ms - now_ms) / 1000))
        raise rate_limited(self.refusal.format(retry=retry, amount=self.item.amount, window=window_text(self.item)),
                           {"Retry-After": str(retry)}, retry_after_sec=retry, limit=self.kind)


async def reserve_all(budgets: list[tuple[AttemptBudget, str]]) -> list[Reservation]:
    """Reserve one attempt in each budget, or none: a refusal by one hands back what the others reserved."""
    held: list[Reservation] = []
    try:
        for budget, value in budgets:
            held.append(await budget.reserve(value))
    except BaseException:
        for r in held:
            with contextlib.suppress(Exception):
                await r.release()
        raise
    return held
