"""The tag operations every surface shares: the caller's tags with counts, an item's tags (replace, add, remove), a
tag renamed (onto an existing one: merged) or deleted, and tags given with an ingest or an import.

A tag is its user's: an item carries its saver's tags, and only the saver (the item's owner) changes them, so a
member of a shared folder sees the owner's tags read-only (403 forbidden_scope when they try). A folder-scoped token
sees and sets tags only on the items it can see (`store.items.visible`); renaming or deleting a tag reaches every
item of the user, so it takes a whole-library token. Renaming and deleting take the tags nested in the name along
(`work` → `job` makes `work/acme` `job/acme`); removing a tag from one item takes that tag alone. Every change of an
item's tags sends `item.updated` with `changed: ["tags"]`."""

from __future__ import annotations

import uuid
from typing import Any, NoReturn

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal, require, require_whole_library
from lev.core import context
from lev.core.errors import forbidden_scope, invalid_body, not_found
from lev.plumbing.deps import Deps
from lev.store import items as item_store
from lev.store import tags as tag_store
from lev.store.scope import Scope
from lev.tags.names import check_name, check_names
from lev.webhooks import events


async def list_tags(deps: Deps, principal: Principal) -> dict[str, Any]:
    """The caller's tags that items it can see carry, each with how many, in name order (case-insensitive)."""
    require(principal, "read")
    async with deps.db.read_session() as s:
        found = await tag_store.tag_counts(s, principal.scope)
    context.note_results(len(found))
    return {"tags": found}


async def refuse_change(s: AsyncSession, scope: Scope, item_id: uuid.UUID) -> NoReturn:
    """Why a change of an item's tags or reading state was refused: 403 forbidden_scope when the caller sees it
    through a shared folder (it is its saver's), else 404."""
    if await item_store.is_visible(s, scope, item_id):
        raise forbidden_scope("This item was saved by another member of a shared folder: it, its tags and its "
                              "reading state are theirs, and only they change them.")
    raise not_found()


async def _answer(s: AsyncSession, item_id: uuid.UUID) -> dict[str, Any]:
    return {"item_id": str(item_id), "tags": (await tag_store.names_of(s, [item_id])).get(item_id, [])}


async def set_item_tags(deps: Deps, principal: Principal, item_id: uuid.UUID, values: Any, *,
                        replace: bool) -> dict[str, Any]:
    """The item's tags become `values` (`replace`) or gain them; its tags after."""
    require(principal, "write")
    names = check_names(values)
    async with deps.db.transaction() as s:
        if not await item_store.lock_own(s, principal.scope, item_id):
            await refuse_change(s, principal.scope, item_id)
        if replace:
            changed = await tag_store.replace_on_item(s, principal.user_id, item_id, names)
        else:
            have = {tag_store.key_of(n) for n in (await tag_store.names_of(s, [item_id])).get(item_id, [])}
            if len(have | {tag_store.key_of(n) for n in names}) > tag_store.MAX_PER_ITEM:
                raise invalid_body(f"tags: an item carries at most {tag_store.MAX_PER_ITEM} tags (it has "
                                   f"{len(have)}).", parameter="tags")
            changed = await tag_store.add_to_item(s, principal.user_id, item_id, names)
        if changed:
            await events.items_updated(s, [item_id], ["tags"])
        return await _answer(s, item_id)


async def remove_item_tag(deps: Deps, principal: Principal, item_id: uuid.UUID, name: str) -> dict[str, Any]:
    """Take one tag off the item (the tags nested in it stay); 404 when the item does not carry it."""
    require(principal, "write")
    key = tag_store.key_of(check_name(name, "name"))
    async with deps.db.transaction() as s:
        if not await item_store.lock_own(s, principal.scope, item_id):
            await refuse_change(s, principal.scope, item_id)
        if not await tag_store.remove_from_item(s, principal.user_id, item_id, key):
            raise not_found(f"The item has no tag {name[:64]!r}.")
        await events.items_updated(s, [item_id], ["tags"])
        return await _answer(s, item_id)


def _moved(name: str, old: str, new: str) -> str:
    """`name` (the renamed tag or one nested in it) with its first parts, `old`'s, replaced by `new`."""
    depth = old.count("/") + 1
    return "/".join([*new.split("/"), *name.split("/")[depth:]])


async def rename_tag(deps: Deps, principal: Principal, name: str, new_name: Any) -> dict[str, Any]:
    """Rename a tag and the tags nested in it; onto a tag that exists already, the two are merged (every item
    carries the one tag). 404 for a tag no item carries; 400 for a name nested in the tag itself."""
    require(principal, "write")
    require_whole_library(principal, "rename a tag (it renames it on every item)")
    old, new = check_name(name, "name"), check_name(new_name, "name")
    old_key, new_key = tag_store.key_of(old), tag_store.key_of(new)
    if new_key.startswith(old_key + "/"):
        raise invalid_body(f"name: {new!r} is nested in {old!r} itself; rename it to a name outside it.",
                           parameter="name")
    async with deps.db.transaction() as s:
        tree = await tag_store.subtree(s, principal.user_id, old_key, lock=True)
        touched = await tag_store.items_of(s, [t["id"] for t in tree])
        if not touched:
            raise not_found(f"No item carries the tag {old[:64]!r}.")
        moves = [(t, _moved(t["name"], old, new)) for t in tree]
        too_long = [n for _, n in moves if len(n) > tag_store.MAX_NAME_CHARS]
        if too_long:
            raise invalid_body(f"name: the renamed tag {too_long[0][:40]!r}… would be longer than "
                               f"{tag_store.MAX_NAME_CHARS} characters.", parameter="name")
        merged = False
        for tag, to in moves:
            target = await tag_store.by_key(s, principal.user_id, tag_store.key_of(to), lock=True)
            if target is not None and target["id"] != tag["id"]:
                merged = True
                touched += await tag_store.items_of(s, [target["id"]])
                await tag_store.move(s, tag["id"], target["id"])
                if target["name"] != to:
                    await tag_store.rename(s, target["id"], to)
            elif tag["name"] != to:
                await tag_store.rename(s, tag["id"], to)
        touched = sorted(set(touched))
        await tag_store.refresh_keys(s, touched)
        await events.items_updated(s, touched, ["tags"])
        now = await tag_store.by_key(s, principal.user_id, new_key)
        count = len(await tag_store.items_of(s, [now["id"]])) if now else 0
    return {"name": new, "count": count, "merged": merged, "items": len(touched)}


async def delete_tag(deps: Deps, principal: Principal, name: str) -> dict[str, Any]:
    """Take a tag and the tags nested in it off every item; 404 for a tag no item carries."""
    require(principal, "write")
    require_whole_library(principal, "delete a tag (it takes it off every item)")
    key = tag_store.key_of(check_name(name, "name"))
    async with deps.db.transaction() as s:
        tree = await tag_store.subtree(s, principal.user_id, key, lock=True)
        touched = await tag_store.items_of(s, [t["id"] for t in tree])
        if not touched:
            raise not_found(f"No item carries the tag {name[:64]!r}.")
        await tag_store.delete_tags(s, [t["id"] for t in tree])
        await tag_store.refresh_keys(s, touched)
        await events.items_updated(s, touched, ["tags"])
    return {"name": tree[0]["name"] if tree[0]["key"] == key else name, "deleted": True, "items": len(touched)}


async def tag_new_item(s: AsyncSession, user_id: uuid.UUID, item_id: uuid.UUID, names: list[str], *,
                       announce: bool = False) -> None:
    """Put checked `names` on an item in the caller's transaction (an ingest, an import): the user's own item.
    With `announce` (an item that existed before), a change sends item.updated; a new item's item.created says
    it all."""
    if not names:
        return
    have = {tag_store.key_of(n) for n in (await tag_store.names_of(s, [item_id])).get(item_id, [])}
    room = tag_store.MAX_PER_ITEM - len(have)
    names = [n for n in names if tag_store.key_of(n) in have] + [n for n in names if tag_store.key_of(n) not in have][
        :max(room, 0)]
    if await tag_store.add_to_item(s, user_id, item_id, names) and announce:
        await events.items_updated(s, [item_id], ["tags"])


def tree(tags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The caller's tags (`list_tags`) as a list shows them: each under its parents, part by part, a parent no item
    carries as a row without a count; `label` is the last part, `depth` how deep it is."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for t in sorted(tags, key=lambda t: tag_store.key_of(t["name"]).split("/")):
        parts = t["name"].split("/")
        for depth in range(len(parts)):
            name = "/".join(parts[:depth + 1])
            if tag_store.key_of(name) in seen:
                continue
            seen.add(tag_store.key_of(name))
            rows.append({"name": name, "label": parts[depth], "depth": depth,
                         "count": t["count"] if depth == len(parts) - 1 else None})
    return rows
