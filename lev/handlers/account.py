"""The account API under /api/account: sign-up, sign-in, sign-out, password, tokens and the activity log.

Cookie-authenticated (a bearer token never reaches it); the session check and CSRF run in `lev.app.session_info`.
"""

from __future__ import annotations

from typing import Any

from lev import runtime
from lev.auth import accounts
from lev.auth.policy import parse_uuid, parse_uuid_field
from lev.auth.principal_cache import changing_auth
from lev.core import context
from lev.handlers import deps, principal
from lev.limits.ratelimit import Limiter
from lev.store import activity as activity_store
from lev.store import users as user_store

Response = tuple[dict[str, Any], int, dict[str, str]]


def _client_ip() -> str | None:
    info = context.current()
    return info.ip if info is not None else None


def _limiter() -> Limiter:
    return runtime.get_runtime().limiter


def _signed_in(user: dict[str, Any], cookie: str, csrf: str, status: int) -> Response:
    body = {"user_id": str(user["id"]), "email": user["email"], "tier": user["tier"], "csrf_token": csrf}
    return body, status, {"Set-Cookie": accounts.cookie_header(deps().settings, cookie)}


async def sign_up(body: dict[str, Any]) -> Response:
    settings = deps().settings
    async with deps().db.transaction() as s:
        user = await accounts.signup(s, settings, _limiter(), body["email"], body["password"], _client_ip())
        cookie, csrf = await accounts.start_session(s, settings, user["id"])
    context.note_user(user["id"])
    return _signed_in(user, cookie, csrf, 201)


async def sign_in(body: dict[str, Any]) -> Response:
    async with deps().db.transaction() as s:
        user = await accounts.login(s, _limiter(), body["email"], body["password"], _client_ip())
        cookie, csrf = await accounts.start_session(s, deps().settings, user["id"])
    context.note_user(user["id"])
    return _signed_in(user, cookie, csrf, 200)


async def sign_out(token_info: dict[str, Any]) -> Response:
    p = principal(token_info)
    async with deps().db.transaction() as s:
        await accounts.end_session(s, p)
    return {"signed_out": True}, 200, {"Set-Cookie": accounts.cookie_header(deps().settings, None)}


async def get_account(token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    async with deps().db.read_session() as s:
        return await accounts.account_view(s, deps().settings, p)


async def change_password(body: dict[str, Any], token_info: dict[str, Any]) -> Response:
    """Every token, grant, session and pending code of the user ends; this browser gets a fresh session."""
    p = principal(token_info)
    async with changing_auth(deps().db) as s:
        changed, cookie, csrf = await accounts.change_password(
            s, deps().settings, _limiter(), p, body["current_password"], body["new_password"], _client_ip())
    body = {"revoked_tokens": changed.revoked_tokens, "ended_sessions": changed.ended_sessions, "csrf_token": csrf}
    return body, 200, {"Set-Cookie": accounts.cookie_header(deps().settings, cookie)}


async def list_tokens(token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    async with deps().db.read_session() as s:
        found = await accounts.list_tokens(s, p.user_id)
    context.note_results(len(found))
    return {"tokens": found}


async def create_token(body: dict[str, Any], token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    p = principal(token_info)
    folder_ids = [parse_uuid_field(f, "folder_ids") for f in body.get("folder_ids") or []]
    settings = deps().settings
    async with deps().db.transaction() as s:
        user = await user_store.by_email(s, str(p.extra["email"]))
        assert user is not None
        minted = await accounts.mint_token(
            s, settings, user, name=body["name"], write=body.get("write", False),
            folder_ids=[f for f in folder_ids if f is not None], kb_only=body.get("kb_only", True),
            expires_in_days=body.get("expires_in_days", settings.token_default_days),
        )
    return minted, 201


async def revoke_token(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    token_id = parse_uuid(id_)
    async with changing_auth(deps().db) as s:
        return await accounts.revoke_token(s, p.user_id, token_id)


async def list_account_activity(token_info: dict[str, Any], token_id: str | None = None, surface: str | None = None,
                        page: int = 1, per_page: int = 50) -> dict[str, Any]:
    p = principal(token_info)
    tid = parse_uuid_field(token_id, "token_id")
    async with deps().db.read_session() as s:
        entries, total = await activity_store.list_for_user(s, p.user_id, token_id=tid, surface=surface, page=page,
                                                            per_page=per_page)
    context.note_results(len(entries))
    return {"entries": entries, "total": total, "page": page, "per_page": per_page}


async def clear_account_activity(token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    await runtime.get_runtime().activity.flush()  # entries still queued in this process go too
    async with deps().db.transaction() as s:
        cleared = await accounts.clear_activity(s, p.user_id)
    context.forget_user()
    return {"cleared": cleared}
