"""The one tier rule (lev/limits/tiers.py): what each tier allows, from the settings, and the token room that minting
and the consent page both read."""

from __future__ import annotations

from lev.core.settings import Settings
from lev.limits.tiers import UNLIMITED, Tiers, TokenRoom


def test_tiers_come_from_the_settings() -> None:
    tiers = Tiers.from_settings(Settings(tier_free_tokens=2, tier_pro_tokens=-1, tier_free_minutes=5,
                                         tier_pro_minutes=600))
    assert (tiers.token_cap("free"), tiers.token_cap("pro")) == (2, UNLIMITED)
    assert (tiers.minute_cap("free"), tiers.minute_cap("pro")) == (5, 600)


def test_an_unknown_tier_gets_nothing() -> None:
    tiers = Tiers.from_settings(Settings())
    assert tiers.token_cap("enterprise") == 0 and tiers.minute_cap("enterprise") == 0


def test_the_token_room() -> None:
    assert TokenRoom("pro", UNLIMITED, 10_000).allowed
    assert TokenRoom("free", 2, 1).allowed
    assert not TokenRoom("free", 2, 2).allowed
    assert not TokenRoom("free", 0, 0).allowed
