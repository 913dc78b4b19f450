"""The token endpoint's grants (RFC 6749): a code exchanged for a grant (once; PKCE S256, RFC 8707 resource), a
refresh token rotated on every use, and revocation (RFC 7009). A one-time credential presented again revokes the
grant it produced. Every change drops every process's cached principals (`lev.auth.principal_cache`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth import principal_cache as principals
from lev.auth.policy import OAuthBinding, hash_token, mint, new_token
from lev.core import clock, context
from lev.core.errors import ApiError
from lev.core.settings import Settings
from lev.limits.tiers import Tiers
from lev.oauth.clients import SCOPES, Client, OAuthError
from lev.store import oauth as oauth_store
from lev.store import tokens as token_store
from lev.store.db import Database

READ, WRITE = SCOPES
ACCESS_TTL_SEC = 3600
REFRESH_PREFIX = "lev_rt_"
_VERIFIER = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")


def pkce_matches(verifier: str, code_challenge: str) -> bool:
    if not _VERIFIER.match(verifier):
        return False
    digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return hmac.compare_digest(digest, code_challenge)


def _scope(capabilities: Any) -> str:
    return f"{READ} {WRITE}" if "write" in capabilities else READ


def _tokens(access: str, refresh: str, access_expires: Any, capabilities: Any) -> dict[str, Any]:
    return {"access_token": access, "token_type": "Bearer", "refresh_token": refresh,
            "expires_in": max(1, int((access_expires - clock.now()).total_seconds())), "scope": _scope(capabilities)}


def _check_resource(form: dict[str, str], resource: str) -> None:
    asked = form.get("resource")
    if asked is not None and asked.rstrip("/") != resource:
        raise OAuthError("invalid_target", f"The grant is for {resource}, not {asked}.")


class _Replayed(OAuthError):
    """A one-time credential (a code, a rotated refresh token) presented again: the grant it produced is revoked
    (RFC 6749 4.1.2, OAuth 2.1 4.3.1)."""

    def __init__(self, token_id: uuid.UUID | None, what: str) -> None:
        super().__init__("invalid_grant", f"The {what} was already used; its grant is revoked.")
        self.token_id = token_id


@asynccontextmanager
async def _grant_change(db: Database) -> AsyncIterator[AsyncSession]:
    """A transaction on a grant. A replay raised inside it revokes the grant and still commits, since the
    revocation is the answer to it; then every process's cached principals are dropped and the replay refused."""
    replay: _Replayed | None = None
    async with db.transaction() as s:
        try:
            yield s
        except _Replayed as exc:
            if exc.token_id is not None:
                await token_store.revoke_token(s, exc.token_id)
            replay = exc
    if replay is not None:
        await principals.invalidate()  # the revoked grant's access token may be cached in any process
        raise replay


def _presented(row: dict[str, Any] | None, client: Client, what: str, used: str) -> dict[str, Any]:
    """The locked row of a one-time credential this client presented: unknown (or another client's) is
    invalid_grant; one already used (`used` set) is a replay, which revokes its grant."""
    if row is None or row["client_id"] != client.client_id:
        raise OAuthError("invalid_grant", f"The {what} is unknown.")
    if row[used] is not None:
        raise _Replayed(row["token_id"], what)
    return row


async def exchange_code(db: Database, settings: Settings, client: Client, form: dict[str, str]) -> dict[str, Any]:
    """authorization_code grant: one use per code; a second use revokes what the first produced (RFC 6749
    4.1.2). Every refusal is invalid_grant or invalid_target and creates nothing."""
    code, verifier, redirect_uri = form.get("code"), form.get("code_verifier"), form.get("redirect_uri")
    if not code or not verifier or not redirect_uri:
        raise OAuthError("invalid_request", "code, code_verifier and redirect_uri are required.")
    async with _grant_change(db) as s:
        row = _presented(await oauth_store.lock_code(s, hash_token(code)), client, "authorization code", "used_at")
        if row["expires_at"] <= clock.now():
            raise OAuthError("invalid_grant", "The authorization code has expired (or a password change voided "
                                              "it).")
        elif redirect_uri != row["redirect_uri"]:
            raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request's.")
        elif not pkce_matches(verifier, row["code_challenge"]):
            raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge.")
        else:
            _check_resource(form, row["resource"])
            out = await _mint_grant(s, settings, client, row)
            await oauth_store.mark_code_used(s, row["code_hash"], out.pop("token_id"))
    context.note_user(row["user_id"])
    return out


async def _mint_grant(s: Any, settings: Settings, client: Client, row: dict[str, Any]) -> dict[str, Any]:
    choice = row["choice"]
    user = {"id": row["user_id"], "tier": row["tier"], "email": row["email"]}
    access_expires = clock.now() + timedelta(seconds=ACCESS_TTL_SEC)
    try:
        access, token_id = await mint(
            s, user, choice.get("client_name") or client.name, write=choice["write"],
            folder_ids=[uuid.UUID(f) for f in choice["folder_ids"]], kb_only=choice["kb_only"],
            expires_in_days=choice["expires_in_days"], write_cap=settings.default_write_cap,
            tiers=Tiers.from_settings(settings),
            oauth=OAuthBinding(client_id=client.client_id, resource=row["resource"], access_expires_at=access_expires),
        )
    except ApiError as err:  # the tier changed, or a chosen folder was deleted, since the user allowed it
        raise OAuthError("invalid_grant", err.message or err.code) from None
    refresh = REFRESH_PREFIX + secrets.token_urlsafe(32)
    await oauth_store.insert_refresh(s, hash_token(refresh), token_id)
    capabilities = ["read", "write"] if choice["write"] else ["read"]
    return {**_tokens(access, refresh, access_expires, capabilities), "token_id": token_id}


async def refresh_grant(db: Database, client: Client, form: dict[str, str]) -> dict[str, Any]:
    """refresh_token grant: rotated on every use; presenting a rotated one again revokes the grant."""
    presented = form.get("refresh_token")
    if not presented:
        raise OAuthError("invalid_request", "refresh_token is required.")
    async with _grant_change(db) as s:
        row = _presented(await oauth_store.lock_refresh(s, hash_token(presented)), client, "refresh token",
                         "rotated_at")
        if row["revoked_at"] is not None or row["expires_at"] <= clock.now():
            raise OAuthError("invalid_grant", "The grant was revoked or has expired.")
        else:
            _check_resource(form, row["resource"])
            extra = set((form.get("scope") or "").split()) - set(_scope(row["capabilities"]).split())
            if extra:
                raise OAuthError("invalid_scope", f"The grant does not include {' '.join(sorted(extra))}.")
            await oauth_store.rotate_refresh(s, row["token_hash"])
            access, digest, prefix = new_token()
            access_expires = min(clock.now() + timedelta(seconds=ACCESS_TTL_SEC), row["expires_at"])
            await token_store.replace_access(s, row["token_id"], digest, prefix, access_expires)
            refresh = REFRESH_PREFIX + secrets.token_urlsafe(32)
            await oauth_store.insert_refresh(s, hash_token(refresh), row["token_id"])
            out = _tokens(access, refresh, access_expires, row["capabilities"])
    await principals.invalidate()  # its previous access token replaced: cached nowhere now
    return out


async def revoke(db: Database, client: Client, form: dict[str, str]) -> None:
    """RFC 7009: revoke the grant an access or refresh token of this client belongs to; unknown tokens are fine."""
    token = form.get("token")
    if not token:
        raise OAuthError("invalid_request", "token is required.")
    async with db.transaction() as s:
        grant = await oauth_store.grant_of(s, client.client_id, hash_token(token))
        if grant is not None:
            await token_store.revoke_token(s, grant)
    if grant is not None:
        await principals.invalidate()
