"""Accounts: throttled sign-up and sign-in, where a sign-in may lead (`safe_next`), browser sessions with their CSRF
token, the account API's password change (`lev.auth.passwords` does the change itself), and the one token-minting
rule that the account API, the pages and the CLI all call."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import secrets
import uuid
from datetime import timedelta
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.passwords import PasswordChanged, check_new_password, set_password
from lev.auth.policy import Principal, mint
from lev.core import clock, context
from lev.core.errors import (
    ApiError,
    csrf_failed,
    invalid_body,
    invalid_credentials,
    not_found,
    not_signed_in,
    signup_closed,
)
from lev.core.settings import Settings
from lev.limits import quota
from lev.limits.ratelimit import Limiter
from lev.limits.tiers import Tiers
from lev.store import activity as activity_store
from lev.store import members as member_store
from lev.store import sessions as session_store
from lev.store import tokens as token_store
from lev.store import users as user_store

COOKIE_NAME = "lev_session"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    """A real argon2id hash to verify against when the email is unknown, so both cases cost the same time; made on
    the first sign-in, not at import (a quarter second of CPU in every process, the CLI's included)."""
    return user_store.hash_password(secrets.token_urlsafe(16))


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def cookie_header(settings: Settings, value: str | None) -> str:
    """The Set-Cookie value that starts (or, with None, ends) a browser session."""
    secure = "; Secure" if context.base_url().lower().startswith("https://") else ""
    if value is None:
        return f"{COOKIE_NAME}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax{secure}"
    return f"{COOKIE_NAME}={value}; Path=/; Max-Age={settings.session_days * 86400}; HttpOnly; SameSite=Lax{secure}"


async def start_session(s: AsyncSession, settings: Settings, user_id: uuid.UUID) -> tuple[str, str]:
    """A new session for the user: (cookie value, csrf token). Only the cookie value's hash is stored."""
    value, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    expires = clock.now() + timedelta(days=settings.session_days)
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
        shared=member_store.shared_ids(row),
        peers=member_store.peer_ids(row),
    )


def check_csrf(principal: Principal, method: str, header: str | None) -> None:
    """403 csrf_failed unless an unsafe cookie-authenticated request carries the session's X-CSRF-Token."""
    if method.upper() in SAFE_METHODS:
        return
    expected = str(principal.extra.get("csrf_token") or "")
    if not header or not expected or not hmac.compare_digest(header.encode(), expected.encode()):
        raise csrf_failed()


MAX_NEXT = 2000
_ORIGIN_PROBE = "https://lev.invalid"


def safe_next(value: str | None) -> str:
    """Where a sign-in may lead: a path of Lev's own origin, else "/". Browsers read a backslash as a slash and drop
    tabs and newlines anywhere in a URL (`/<backslash>host/` and `/<tab>/host/` are `//host/`, another site), so a
    backslash, a control character or a space anywhere refuses the value, as do `//` and encoded slashes in the path
    and anything that would resolve to another origin."""
    if not value or len(value) > MAX_NEXT or not value.startswith("/") or value.startswith("//"):
        return "/"
    if any(c == "\\" or ord(c) <= 0x20 or ord(c) == 0x7F for c in value):
        return "/"
    path = value.split("?", 1)[0].split("#", 1)[0]
    if re.search(r"%(2f|5c)", path, re.IGNORECASE):
        return "/"
    decoded = unquote(path)
    if "//" in decoded or any(c == "\\" or ord(c) <= 0x20 or ord(c) == 0x7F for c in decoded):
        return "/"
    try:
        parts = urlsplit(value)
        joined = urlsplit(urljoin(_ORIGIN_PROBE + "/", value))
    except ValueError:
        return "/"
    if parts.scheme or parts.netloc or f"{joined.scheme}://{joined.netloc}" != _ORIGIN_PROBE:
        return "/"
    return value


async def signup(s: AsyncSession, settings: Settings, limiter: Limiter, email: str, password: str,
                 ip: str | None) -> dict[str, Any]:
    """Create a user (tier LEV_SIGNUP_TIER; the first account of an empty instance is its owner's and gets `pro`);
    403 signup_closed when LEV_SIGNUP=closed, 429 past the source address's sign-up budget, 409 email_taken (the
    person learns to sign in instead; the password is hashed either way, so both answers take the same time)."""
    if settings.signup.strip().lower() != "open":
        raise signup_closed()
    email = email.strip()
    if "@" not in email[1:-1] or any(c.isspace() for c in email):
        raise invalid_body("email must be an email address.")
    check_new_password(password)
    await limiter.check_sign_up(ip)
    tier = settings.signup_tier if settings.signup_tier in ("free", "pro") else "free"
    if await user_store.none_yet(s):
        tier = "pro"
    user_id = await user_store.create_user(s, email, tier, password)
    if user_id is None:
        raise ApiError("email_taken", "An account with this email exists; sign in instead.")
    return {"id": user_id, "email": email, "tier": tier}


async def any_account(db: Any) -> bool:
    """Whether the server has an account yet (its own read transaction)."""
    async with db.read_session() as s:
        return await user_store.any_yet(s)


async def create_user(s: AsyncSession, email: str, tier: str, password: str | None = None) -> uuid.UUID:
    """A new user (`lev user create`); 409 email_taken when the address, in any case, is taken."""
    if password is not None:
        check_new_password(password)
    user_id = await user_store.create_user(s, email, tier, password, verified=True)  # the operator vouches for it
    if user_id is None:
        raise ApiError("email_taken", f"A user with email {email.strip()} already exists.")
    return user_id


async def login(s: AsyncSession, limiter: Limiter, email: str, password: str, ip: str | None) -> dict[str, Any]:
    """The user with these credentials, or 401 invalid_credentials (never saying which part is wrong); 429 while the
    email or the source address has used up its failed attempts. The attempt is reserved before the password is
    checked and handed back when it succeeds, so a parallel burst checks no more passwords than the budget."""
    held = await limiter.reserve_sign_in(email, ip)
    failed = False
    try:
        user = await user_store.by_email(s, email)
        stored = user["password_hash"] if user and user["password_hash"] else _dummy_hash()
        ok = await asyncio.to_thread(user_store.verify_password, stored, password)
        failed = user is None or not user["password_hash"] or not ok
    finally:
        if not failed:  # a success, or an error that checked nothing: it does not count
            for r in held:
                await r.release()
    if failed or user is None:
        raise invalid_credentials()
    return user


async def change_password(s: AsyncSession, settings: Settings, limiter: Limiter, principal: Principal, current: str,
                          new: str, ip: str | None) -> tuple[PasswordChanged, str, str]:
    """The account API's and the account page's password change: the current password is checked (throttled like a
    sign-in), then `passwords.set_password` ends every token, grant, session and pending code of the user. The
    caller's session ends too and a fresh one replaces it: (what ended, cookie value, csrf token)."""
    check_new_password(new)
    user = await login(s, limiter, str(principal.extra.get("email") or ""), current, ip)
    changed = await set_password(s, user["id"], new)
    cookie, csrf = await start_session(s, settings, user["id"])
    return changed, cookie, csrf


async def mint_token(s: AsyncSession, settings: Settings, user: dict[str, Any], *, name: str, write: bool,
                     folder_ids: list[uuid.UUID], kb_only: bool, expires_in_days: int,
                     write_cap: int | None = None) -> dict[str, Any]:
    """Mint a token (account API, pages and CLI alike): 402 payment_required {tier, cap, used} at the tier's
    cap. Returns the shown-once token with its settings."""
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


async def account_view(s: AsyncSession, settings: Settings, principal: Principal) -> dict[str, Any]:
    used = await quota.used_seconds(s, principal.user_id)
    user = await user_store.by_id(s, principal.user_id)
    return {
        "user_id": str(principal.user_id), "email": principal.extra.get("email"), "tier": principal.tier,
        "email_verified": bool(user and user.get("email_verified_at")),
        "csrf_token": principal.extra.get("csrf_token"),
        "usage": {"month": clock.month_key(), "transcription_minutes_used": round(used / 60, 1),
                  "transcription_minutes_cap": Tiers.from_settings(settings).minute_cap(principal.tier)},
    }


async def clear_activity(s: AsyncSession, user_id: uuid.UUID) -> int:
    return await activity_store.clear_for_user(s, user_id)
