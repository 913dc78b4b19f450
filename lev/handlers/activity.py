"""GET /api/v1/activity: the user's activity log (whole-library tokens only)."""

from __future__ import annotations

from typing import Any

from lev.auth.policy import parse_uuid_field, require_whole_library
from lev.core import context
from lev.handlers import deps, principal
from lev.store import activity as activity_store


async def list_activity(token_info: dict[str, Any], token_id: str | None = None, surface: str | None = None,
                       page: int = 1, per_page: int = 50) -> dict[str, Any]:
    p = principal(token_info)
    require_whole_library(p, "read the activity log")
    tid = parse_uuid_field(token_id, "token_id")
    async with deps().db.transaction() as s:
        entries, total = await activity_store.list_for_user(s, p.user_id, token_id=tid, surface=surface, page=page,
                                                            per_page=per_page)
    context.note_results(len(entries))
    return {"entries": entries, "total": total, "page": page, "per_page": per_page}
