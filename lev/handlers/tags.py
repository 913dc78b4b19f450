"""Tag operations: the caller's tags, an item's tags (replace, add, remove one), a tag renamed or deleted."""

from __future__ import annotations

from typing import Any

from lev.auth.policy import parse_uuid
from lev.handlers import deps, principal
from lev.tags import service as tags


async def list_tags(token_info: dict[str, Any]) -> dict[str, Any]:
    return await tags.list_tags(deps(), principal(token_info))


async def replace_item_tags(id_: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    return await tags.set_item_tags(deps(), principal(token_info), parse_uuid(id_), body["tags"], replace=True)


async def add_item_tags(id_: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    return await tags.set_item_tags(deps(), principal(token_info), parse_uuid(id_), body["tags"], replace=False)


async def remove_item_tag(id_: str, name: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await tags.remove_item_tag(deps(), principal(token_info), parse_uuid(id_), name)


async def rename_tag(name: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    return await tags.rename_tag(deps(), principal(token_info), name, body["name"])


async def delete_tag(name: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await tags.delete_tag(deps(), principal(token_info), name)
