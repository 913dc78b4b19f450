"""Feed operations: list, follow, get, update (rename, move, pause, resume), unfollow, refresh, OPML in and out."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import UploadFile
from starlette.responses import Response

from lev.auth.policy import parse_uuid, parse_uuid_field
from lev.core import context
from lev.core.errors import file_too_large, invalid_body
from lev.feeds import service as feeds
from lev.handlers import deps, principal


async def list_feeds(token_info: dict[str, Any], folder_id: str | None = None) -> dict[str, Any]:
    found = await feeds.list_feeds(deps(), principal(token_info), parse_uuid_field(folder_id, "folder_id"))
    context.note_results(len(found))
    return {"feeds": found}


async def create_feed(body: dict[str, Any], token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    folder = parse_uuid_field(body.get("folder_id"), "folder_id")
    feed, new = await feeds.follow(deps(), principal(token_info), body["url"], folder, body.get("title"))
    return feed, 201 if new else 200


async def get_feed(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await feeds.get(deps(), principal(token_info), parse_uuid(id_))


async def update_feed(id_: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    return await feeds.update(deps(), principal(token_info), parse_uuid(id_), body)


async def delete_feed(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await feeds.unfollow(deps(), principal(token_info), parse_uuid(id_))


async def refresh_feed(id_: str, token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    return await feeds.refresh(deps(), principal(token_info), parse_uuid(id_)), 202


async def export_opml(token_info: dict[str, Any]) -> Response:
    body = await feeds.export_opml(deps(), principal(token_info))
    return Response(body, media_type="text/x-opml; charset=utf-8", headers={
        "Content-Disposition": 'attachment; filename="lev-feeds.opml"', "Cache-Control": "no-store"})


async def import_opml(token_info: dict[str, Any], file: Any = None) -> dict[str, Any]:
    p = principal(token_info)
    if not isinstance(file, UploadFile):
        raise invalid_body("Send the OPML file as the multipart/form-data field `file`.")
    cap = deps().settings.max_body_bytes
    data = await file.read(cap + 1)
    if len(data) > cap:
        raise file_too_large(f"OPML files are limited to {cap} bytes.", cap)
    result = await feeds.import_opml(deps(), p, data)
    context.note_results(result["added"])
    return result
