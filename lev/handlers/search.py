"""GET /api/v1/search: the MCP search tool's semantics over REST."""

from __future__ import annotations

from typing import Any

from lev.handlers import deps, principal
from lev.library.filters import parse_filters
from lev.library.reads import search as run_search


async def search_knowledge_base(token_info: dict[str, Any], q: str, mode: str = "hybrid", limit: int = 10,
                                folder_id: str | None = None, item_id: str | None = None,
                                kind: list[str] | None = None, site: str | None = None, after: str | None = None,
                                before: str | None = None, tag: list[str] | None = None) -> dict[str, Any]:
    p = principal(token_info)
    filters = parse_filters(folder_id=folder_id, item_id=item_id, kind=kind, site=site, after=after, before=before,
                            tag=tag)
    return await run_search(deps(), p, query=q, mode=mode, limit=limit, filters=filters)
