"""GET /api/v1/token: what the bearer token itself may do, for agents to explain to their user."""

from __future__ import annotations

from typing import Any

from lev import runtime
from lev.core.errors import invalid_token, not_found
from lev.handlers import deps, principal
from lev.store import tokens as token_store


async def introspect_token(token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    if p.token_id is None:
        raise not_found("This request is signed in with a browser session, not a bearer token; the account's "
                        "tokens are listed at /api/account/tokens.")
    async with deps().db.transaction() as s:
        record = await token_store.describe_token(s, p.token_id)
    if record is None:  # the user was deleted after the token was authenticated
        raise invalid_token()
    usage = await runtime.get_runtime().limiter.status(p)
    return {
        "id": str(p.token_id),
        "name": p.name,
        "capabilities": sorted(p.capabilities),
        "whole_library": p.is_unscoped,
        "folders": None if p.is_unscoped else record["folders"],
        "kb_only": p.kb_only,
        "expires_at": record["expires_at"].isoformat(),
        "created_at": record["created_at"].isoformat() if record["created_at"] else None,
        **usage,
    }
