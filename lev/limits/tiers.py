"""The one tier rule: what each tier allows (tokens held at once, transcription minutes a month), read from the
settings once, and the token-room check that minting (account API, pages, CLI, OAuth grants) and the consent page
share. -1 is unlimited; an unknown tier gets nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.core.errors import payment_required
from lev.core.settings import Settings
from lev.store import tokens as token_store

UNLIMITED = -1


@dataclass(frozen=True)
class Tiers:
    tokens: Mapping[str, int]
    minutes: Mapping[str, int]

    @classmethod
    def from_settings(cls, settings: Settings) -> Tiers:
        return cls(tokens={"free": settings.tier_free_tokens, "pro": settings.tier_pro_tokens},
                   minutes={"free": settings.tier_free_minutes, "pro": settings.tier_pro_minutes})

    def token_cap(self, tier: str) -> int:
        return int(self.tokens.get(tier, 0))

    def minute_cap(self, tier: str) -> int:
        return int(self.minutes.get(tier, 0))


@dataclass(frozen=True)
class TokenRoom:
    """The tokens a user's tier allows at once and the active ones the user holds."""

    tier: str
    cap: int
    used: int

    @property
    def allowed(self) -> bool:
        return self.cap == UNLIMITED or self.used < self.cap


async def token_room(session: AsyncSession, tiers: Tiers, user: Mapping[str, Any]) -> TokenRoom:
    return TokenRoom(user["tier"], tiers.token_cap(user["tier"]), await token_store.count_active(session, user["id"]))


async def check_token_room(session: AsyncSession, tiers: Tiers, user: Mapping[str, Any]) -> None:
    """402 payment_required {tier, cap, used} when the user's tier holds all the tokens it may."""
    room = await token_room(session, tiers, user)
    if not room.allowed:
        raise payment_required(
            f"The {room.tier} tier cannot mint more tokens (cap {room.cap}, used {room.used}). On a self-hosted Lev "
            f"the operator lifts it with `lev user set-tier {user['email']} pro`.",
            tier=room.tier, cap=room.cap, used=room.used,
        )
