"""Accounts: sign-up, throttled sign-in, browser sessions with their CSRF token, password change, and the
one token-minting rule that the account API, the pages and the CLI all call."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal, mint
from lev.core import clock, context
from lev.core.errors import (
    csrf_failed,
    email_taken,
    invalid_body,
    invalid_credentials,
    not_found,
    not_signed_in,
    signup_closed,
)
from lev.core.settings import get_settings
from lev.limits import quota
from lev.limits.tiers import Tiers
from lev.runtime import get_runtime
from store import activity as activity_store
from store import sessions as session_store
from store import tokens as token_store
from store import users as user_store

COOKIE_NAME = "lev_session"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# A real argon2id hash to verify against when the email is unknown, so both cases cost the same time.
_DUMMY_HASH = user_store.hash_password(secrets.token_urlsafe(16))


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def cookie_header(value: str | None) -> str:
    """The Set-Cookie value that starts (or, with None, ends) a browser session."""
    settings = get_settings()
    secure = "; Secure" if context.base_url().lower().startswith("https://") else ""
    if value is None:
        return f"{COOKIE_NAME}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax{secure}"
    return f"{COOKIE_NAME}={value}; Path=/; Max-Age={settings.session_days * 86400}; HttpOnly; SameSite=Lax{secure}"


async def start_session(s: AsyncSession, user_id: uuid.UUID) -> tuple[str, str]:
    """A new session for the user: (cookie value, csrf token). Only the cookie value's hash is stored."""
    value, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    expires = clock.now() + timedelta(days=get_settings().session_days)
    await session_store.create_session(s, _digest(value), user_id, csrf, expires)
    return value, csrf


async def end_session(s: AsyncSession, principal: Principal) -> None:
    await session_store.end_session(s, principal_session(principal))


def principal_session(principal: Principal) -> bytes:
    value = principal.extra.get("session")
    if not isinstance(value, bytes):
        raise not_signed_in()
    return value


async def authenticate_session(s: AsyncSession, cookie_value: str | None) -> Principal:
    """The signed-in user behind a session cookie as a Principal (whole library, read and write, not KB-only),
    or 401 not_signed_in."""
    if not cookie_value or len(cookie_value) > 200:
        raise not_signed_in()
    row = await session_store.lookup_session(s, _digest(cookie_value))
    if row is None:
        raise not_signed_in()
    return Principal(
        token_id=None, user_id=row["user_id"], name="web", capabilities=frozenset({"read", "write"}),
        is_unscoped=True, folder_ids=frozenset(), kb_only=False, write_cap=0, tier=row["tier"],
        extra={"session": _digest(cookie_value), "csrf_token": row["csrf_token"], "email": row["email"]},
    )


def check_csrf(principal: Principal, method: str, header: str | None) -> None:
    """403 csrf_failed unless an unsafe cookie-authenticated request carries the session's X-CSRF-Token."""
    if method.upper() in SAFE_METHODS:
        return
    expected = str(principal.extra.get("csrf_token") or "")
    if not header or not expected or not hmac.compare_digest(header.encode(), expected.encode()):
        raise csrf_failed()


def _check_new_password(password: str) -> None:
    if len(password) < 8 or len(password) > 1000:
        raise invalid_body("The password must be 8 to 1000 characters long.")


async def signup(s: AsyncSession, email: str, password: str) -> dict[str, Any]:
    """Create a user (tier LEV_SIGNUP_TIER; the first account of an empty instance is its owner's and gets `pro`);
    403 signup_closed when LEV_SIGNUP=closed, 409 email_taken."""
    settings = get_settings()
    if settings.signup.strip().lower() != "open":
        raise signup_closed()
    email = email.strip()
    if "@" not in email[1:-1] or any(c.isspace() for c in email):
        raise invalid_body("email must be an email address.")
    _check_new_password(password)
    tier = settings.signup_tier if settings.signup_tier in ("free", "pro") else "free"
    if await user_store.none_yet(s):
        tier = "pro"
    user_id = await create_user(s, email, tier, password)
    return {"id": user_id, "email": email, "tier": tier}


async def create_user(s: AsyncSession, email: str, tier: str, password: str | None = None) -> uuid.UUID:
    """A new user (sign-up and `lev user create`); 409 email_taken when the address, in any case, is taken."""
    user_id = await user_store.create_user(s, email, tier, password)
    if user_id is None:
        raise email_taken(email.strip())
    return user_id


async def login(s: AsyncSession, email: str, password: str, ip: str | None) -> dict[str, Any]:
    """The user with these credentials, or 401 invalid_credentials (never saying which part is wrong); 429 after
    too many failures for the email or the source address."""

    limiter = get_runtime().limiter
    await limiter.check_sign_in(email, ip)
    user = await user_store.by_email(s, email)
    stored = user["password_hash"] if user and user["password_hash"] else _DUMMY_HASH
    ok = await asyncio.to_thread(user_store.verify_password, stored, password)
    if user is None or not user["password_hash"] or not ok:
        await limiter.note_failed_sign_in(email, ip)
        raise invalid_credentials()
    return user


async def change_password(s: AsyncSession, principal: Principal, current: str, new: str, ip: str | None) -> int:
    """Set a new password after checking the current one; revokes every token of the user and ends the user's
    other sessions. Returns how many tokens were revoked."""
    email = str(principal.extra.get("email") or "")
    user = await login(s, email, current, ip)
    _check_new_password(new)
    await user_store.set_password(s, user["id"], new)
    await session_store.end_others(s, user["id"], principal_session(principal))
    return await token_store.revoke_all(s, user["id"])


async def mint_token(s: AsyncSession, user: dict[str, Any], *, name: str, write: bool, folder_ids: list[uuid.UUID],
                     kb_only: bool, expires_in_days: int, write_cap: int | None = None) -> dict[str, Any]:
    """Mint a token (account API, pages and CLI alike): 402 payment_required {tier, cap, used} at the tier's
    cap. Returns the shown-once token with its settings."""
    settings = get_settings()
    cap = settings.default_write_cap if write_cap is None else write_cap
    token, token_id = await mint(
        s, user, name, write=write, folder_ids=folder_ids, kb_only=kb_only, expires_in_days=expires_in_days,
        write_cap=cap, tiers=Tiers.from_settings(settings),
    )
    row = next(t for t in await token_store.list_for_user(s, user["id"]) if t["id"] == token_id)
    return {"token": token, **shape_token(row)}


def shape_token(row: dict[str, Any], writes: int | None = None) -> dict[str, Any]:
    """A token as the account API shows it (never its secret)."""
    out: dict[str, Any] = {
        "id": str(row["id"]), "name": row["name"], "prefix": row["prefix"],
        "capabilities": sorted(set(row["capabilities"]) | {"read"}), "is_unscoped": row["is_unscoped"],
        "folder_ids": sorted(str(f) for f in (row["folder_ids"] or [])), "kb_only": row["kb_only"],
        "write_cap": row["write_cap"],
        "created_at": row["created_at"].isoformat() if row["created_at"] else None,
        "last_used_at": row["last_used_at"].isoformat() if row["last_used_at"] else None,
        "expires_at": row["expires_at"].isoformat(),
        "revoked_at": row["revoked_at"].isoformat() if row["revoked_at"] else None,
        "kind": row.get("kind") or "token", "client_id": row.get("client_id"),
    }
    if writes is not None:
        out["writes_this_month"] = writes
    return out


async def list_tokens(s: AsyncSession, user_id: uuid.UUID) -> list[dict[str, Any]]:
    rows = await token_store.list_for_user(s, user_id)
    writes = await token_store.writes_in_month(s, [r["id"] for r in rows], clock.month_key())
    return [shape_token(r, writes.get(r["id"], 0)) for r in reversed(rows)]


async def revoke_token(s: AsyncSession, user_id: uuid.UUID, token_id: uuid.UUID) -> dict[str, Any]:
    """Revoke one of the user's tokens (idempotent); another user's or an unknown id is 404 not_found."""
    row = next((t for t in await token_store.list_for_user(s, user_id) if t["id"] == token_id), None)
    if row is None:
        raise not_found("No such token.")
    if row["revoked_at"] is None:
        await token_store.revoke_token(s, token_id)
        row = next(t for t in await token_store.list_for_user(s, user_id) if t["id"] == token_id)
    return {"id": str(token_id), "revoked_at": row["revoked_at"].isoformat()}


async def account_view(s: AsyncSession, principal: Principal) -> dict[str, Any]:
    used = await quota.used_seconds(s, principal.user_id)
    return {
        "user_id": str(principal.user_id), "email": principal.extra.get("email"), "tier": principal.tier,
        "csrf_token": principal.extra.get("csrf_token"),
        "usage": {"month": clock.month_key(), "transcription_minutes_used": round(used / 60, 1),
                  "transcription_minutes_cap": Tiers.from_settings(get_settings()).minute_cap(principal.tier)},
    }


async def clear_activity(s: AsyncSession, user_id: uuid.UUID) -> int:
    return await activity_store.clear_for_user(s, user_id)
