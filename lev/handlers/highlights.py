"""Highlight operations: an item's highlights (list, add), a highlight's note (change), delete, the caller's
highlights across the library, and an item as Markdown with its highlights."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.responses import Response

from lev.auth.policy import parse_uuid, parse_uuid_field
from lev.handlers import deps, principal
from lev.highlights import service as highlights


async def list_item_highlights(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return {"highlights": await highlights.of_item(deps(), principal(token_info), parse_uuid(id_))}


async def create_highlight(id_: str, body: dict[str, Any], token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    return await highlights.create(deps(), principal(token_info), parse_uuid(id_), body), 201


async def update_highlight(id_: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    return await highlights.update(deps(), principal(token_info), parse_uuid(id_), body)


async def delete_highlight(id_: str, token_info: dict[str, Any]) -> Response:
    await highlights.delete(deps(), principal(token_info), parse_uuid(id_))
    return Response(status_code=204)


async def list_highlights(token_info: dict[str, Any], folder_id: str | None = None, page: int = 1,
                          per_page: int = 50) -> dict[str, Any]:
    return await highlights.recent(deps(), principal(token_info), folder_id=parse_uuid_field(folder_id, "folder_id"),
                                   page=page, per_page=per_page)


async def get_item_markdown(id_: str, token_info: dict[str, Any]) -> Response:
    text, name = await highlights.as_markdown(deps(), principal(token_info), parse_uuid(id_))
    return Response(text, media_type="text/markdown; charset=utf-8", headers={
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}", "Cache-Control": "no-store"})
