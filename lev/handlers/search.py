"""GET /api/v1/search: the MCP search tool's semantics over REST."""

from __future__ import annotations

from typing import Any

from lev.auth.policy import parse_uuid_field
from lev.handlers import deps, principal
from lev.library.reads import search as run_search


async def search_knowledge_base(token_info: dict[str, Any], q: str, mode: str = "hybrid", limit: int = 10,
                 folder_id: str | None = None) -> dict[str, Any]:
    p = principal(token_info)
    folder = parse_uuid_field(folder_id, "folder_id")
    return await run_search(deps(), p, query=q, mode=mode, limit=limit, folder_id=folder)
