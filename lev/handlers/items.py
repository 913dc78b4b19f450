"""Item operations: list, get, change, delete, bulk delete, folder memberships, the stored file, the archived copy."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

from sqlalchemy.ext.asyncio import AsyncSession
from starlette.responses import FileResponse, RedirectResponse, Response

from lev.archive import service as archive
from lev.auth.policy import (
    Principal,
    check_membership_targets,
    folder_visible,
    parse_uuid,
    parse_uuid_field,
    parse_uuid_list,
    require,
    require_filer,
)
from lev.core import context
from lev.core.errors import folder_not_found, forbidden_scope, not_found
from lev.core.pagepolicy import ARCHIVE_POLICY, STORED_FILE_POLICY, shown_inline
from lev.handlers import deps, principal
from lev.ingest.urls import canonical_url
from lev.library import changes
from lev.library import reads as library
from lev.library.filters import parse_tags
from lev.store import items as item_store
from lev.store import members as member_store
from lev.webhooks import events


async def list_items(
    token_info: dict[str, Any],
    folder_id: str | None = None,
    archived: bool | None = None,
    in_kb: bool | None = None,
    page: int = 1,
    per_page: int = 50,
    url: str | None = None,
    tag: list[str] | None = None,
    read: bool | None = None,
) -> dict[str, Any]:
    p = principal(token_info)
    fid = parse_uuid_field(folder_id, "folder_id")
    tag_keys = parse_tags(tag)
    same_page = None
    if url is not None:  # "is this page in my library?": the URL as given or in its canonical form
        url = url.strip()
        try:
            same_page = (url, canonical_url(url))
        except ValueError:  # no canonical form (a malformed host or port): the URL as given only
            same_page = (url, url)
    if fid is not None and not folder_visible(p.scope, fid):
        raise not_found()
    async with deps().db.read_session() as s:
        if fid is not None and not await member_store.role_of(s, p.user_id, fid):
            raise not_found()
        found, total = await item_store.list_items(
            s, p.scope, folder_id=fid, archived=archived, in_kb=in_kb, page=page, per_page=per_page, url=same_page,
            tag_keys=tag_keys, read=read)
    context.note_results(len(found))
    return {"items": found, "total": total, "page": page, "per_page": per_page}


async def get_item(id_: str, token_info: dict[str, Any], offset: int = 0,
                   max_chars: int | None = None) -> dict[str, Any]:
    p = principal(token_info)
    item_id = parse_uuid(id_)
    library.check_page(offset, max_chars)
    return library.page(await library.get_item(deps(), p, item_id), offset, max_chars)


async def delete_item(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    item_id = parse_uuid(id_)
    require(p, "write")
    async with deps().db.transaction() as s:
        if not await item_store.delete_visible(s, p.scope, [item_id], events.deleting(s)):
            await _not_theirs(s, p, item_id, "delete it")
    return {"id": str(item_id), "deleted": True}


async def _not_theirs(s: AsyncSession, p: Principal, item_id: uuid.UUID, action: str) -> NoReturn:
    """Why a change to an item was refused: 403 when the caller sees it through a shared folder (an item is its
    saver's: only they change or delete it), else 404."""
    if await item_store.is_visible(s, p.scope, item_id):
        raise forbidden_scope(f"This item was saved by another member of a shared folder; only they can {action}.")
    raise not_found()


async def update_item(id_: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    return await changes.update_item(deps(), principal(token_info), parse_uuid(id_), body)


async def bulk_delete_items(body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    require(p, "write")
    wanted = parse_uuid_list(body["ids"], "ids")
    not_found_ids: list[str] = []
    async with deps().db.transaction() as s:
        deleted = set(await item_store.delete_visible(s, p.scope, wanted, events.deleting(s)))
    not_found_ids += [str(i) for i in wanted if i not in deleted]
    context.note_results(len(deleted))
    return {"deleted": [str(i) for i in wanted if i in deleted], "not_found": not_found_ids}


async def add_item_to_folders(id_: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    item_id = parse_uuid(id_)
    require(p, "write")
    targets = parse_uuid_list(body["folder_ids"], "folder_ids")
    async with deps().db.transaction() as s:
        if not await item_store.is_visible(s, p.scope, item_id, own=True):
            await _not_theirs(s, p, item_id, "file it into folders")
        # Folders (and memberships) are locked before the item (the order of folder deletes), so neither can vanish
        # before the insert: a concurrent delete that won is a 404, never a foreign-key error.
        reached = await member_store.roles(s, p.user_id, targets, lock=True)
        missing = [str(f) for f in targets if f not in reached]
        if missing:
            raise folder_not_found("Some target folders do not exist.", missing=missing)
        check_membership_targets(p, targets)
        for target in targets:
            require_filer(reached[target], target)
        if not await item_store.is_visible(s, p.scope, item_id, lock=True, own=True):
            raise not_found()
        await item_store.add_memberships(s, item_id, targets)
        folder_ids = await item_store.visible_folder_ids(s, p.scope, item_id)
    return {"item_id": str(item_id), "folder_ids": folder_ids}


async def remove_item_from_folder(id_: str, folder_id: str, token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    item_id = parse_uuid(id_)
    fid = parse_uuid(folder_id)
    require(p, "write")
    if not folder_visible(p.scope, fid):
        raise not_found()
    async with deps().db.transaction() as s:
        role = await member_store.role_of(s, p.user_id, fid)
        if role is None or not await item_store.is_visible(s, p.scope, item_id):
            raise not_found()
        if role == member_store.VIEWER and not await item_store.is_visible(s, p.scope, item_id, own=True):
            raise forbidden_scope("You are a viewer of this shared folder: only its owner and editors take items "
                                  "out of it.", role=role)
        if not await item_store.remove_membership(s, item_id, fid):
            raise not_found()
        folder_ids = await item_store.visible_folder_ids(s, p.scope, item_id)
    return {"item_id": str(item_id), "folder_ids": folder_ids}


async def similar_items(id_: str, token_info: dict[str, Any], limit: int = 10) -> dict[str, Any]:
    p = principal(token_info)
    return await library.similar_items(deps(), p, parse_uuid(id_), limit)


async def get_item_media(id_: str, token_info: dict[str, Any]) -> Response:
    """The item's stored file (audio, video, PDF, image), with byte ranges so players can seek (`#t=`)."""
    p = principal(token_info)
    where, mime, filename = await library.stored_file(deps(), p, parse_uuid(id_))
    if isinstance(where, Path):
        if not where.is_file():
            raise not_found("The item's stored file is gone.")
        inline = shown_inline(mime)
        headers = {"Cache-Control": "private, max-age=300", **({} if inline else
                                                                {"Content-Security-Policy": STORED_FILE_POLICY})}
        return FileResponse(where, media_type=mime, filename=filename, headers=headers,
                            content_disposition_type="inline" if inline else "attachment")
    return RedirectResponse(where, status_code=302, headers={"Cache-Control": "no-store"})


async def get_item_archive(id_: str, token_info: dict[str, Any], download: bool = False) -> Response:
    """The item's archived copy: sandboxed (no script, nothing loaded but its own `data:` images and styles, an
    opaque origin without the session's authority), or a download."""
    data, filename, _row = await archive.read(deps(), principal(token_info), parse_uuid(id_))
    disposition = "attachment" if download else "inline"
    return Response(data, media_type="text/html; charset=utf-8", headers={
        "Content-Security-Policy": ARCHIVE_POLICY, "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cross-Origin-Resource-Policy": "same-origin",
        "Cache-Control": "private, no-store",
        "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(filename)}"})
