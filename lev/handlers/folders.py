"""Folder operations: list (the caller's own and those shared with them), create, rename, delete."""

from __future__ import annotations

from typing import Any

from lev.auth.policy import parse_uuid, require, require_owner, require_whole_library
from lev.auth.principal_cache import changing_auth
from lev.core import context
from lev.core.errors import not_found
from lev.handlers import deps, principal
from lev.library import reads as library
from lev.store import folders as folder_store
from lev.store import members as member_store
from lev.webhooks import events


async def list_folders(token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    async with deps().db.read_session() as s:
        found = await folder_store.list_visible(s, p.scope)
    context.note_results(len(found))
    return {"folders": found}


async def create_folder(body: dict[str, Any], token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    p = principal(token_info)
    require(p, "write")
    require_whole_library(p, "create folders")
    async with deps().db.transaction() as s:
        return await library.create_folder(s, p.user_id, body["name"]), 201


async def delete_folder(id_: str, token_info: dict[str, Any], cascade_items: bool = False) -> dict[str, Any]:
    p = principal(token_info)
    folder_id = parse_uuid(id_)
    require(p, "write")
    require_whole_library(p, "delete folders")
    # a scoped token may lose its last folder (revoked) or one of them; members lose the folder
    async with changing_auth(deps().db) as s:
        require_owner(await member_store.role_of(s, p.user_id, folder_id), "delete it")
        deleted = await folder_store.delete_folder(s, p.scope, folder_id, cascade_items, events.deleting(s))
    if deleted is None:
        raise not_found()
    return deleted


async def rename_folder(id_: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    folder_id = parse_uuid(id_)
    require(p, "write")
    require_whole_library(p, "rename folders")
    async with deps().db.transaction() as s:
        return await library.rename_folder(s, p.scope, folder_id, body["name"])
