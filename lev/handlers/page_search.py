"""The web's search box: its words and operators (`kind:`, `site:`, `folder:"Name"`, `tag:`...) read into a
search of the library, its hits or its error in words (the library page and its live partial)."""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request

from lev.auth.policy import Principal
from lev.core import context
from lev.core.errors import ApiError, invalid_body
from lev.handlers import deps
from lev.library import reads as library
from lev.library.filters import parse_box, parse_filters


async def search_box(request: Request, p: Principal, folder_id: uuid.UUID | None,
                  folders: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str, str]:
    """The search box's hits (or its error in words), its query and its mode."""
    q = (request.query_params.get("q") or "").strip()
    mode = request.query_params.get("mode") or "hybrid"
    mode = mode if mode in ("hybrid", "semantic", "keyword") else "hybrid"
    if not q:
        return None, q, mode
    context.note_search(p, f"GET {request.url.path} search")
    try:
        box = parse_box(q[:2000])
        filters = parse_filters(folder_id=folder_named(folders, box.folder) if box.folder else (
            str(folder_id) if folder_id else None), kind=box.kind or None, site=box.site, after=box.after,
            before=box.before, tag=box.tag or None)
        return await library.search(deps(), p, query=box.words, mode=mode, limit=10, filters=filters), q, mode
    except ApiError as err:
        return {"error": err.message or err.code, "results": []}, q, mode


def folder_named(folders: list[dict[str, Any]], name: str) -> str:
    """The id of the visible folder of that name (case-insensitive), or 400 naming the operator."""
    for f in folders:
        if f["name"].casefold() == name.strip().casefold():
            return str(f["id"])
    raise invalid_body(f'folder: there is no folder named "{name}".', parameter="folder")
