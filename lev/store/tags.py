"""Tags: one user's names for sets of their items, nested with `/` (`work/clients/acme`), case-insensitive per user
(a tag's `key` is its name case-folded; the first spelling stays the name). `item_tags` says which item carries which
tag; `user_items.tag_keys` holds the keys of an item's tags and of their parents, rewritten by every tag write here
(`refresh_keys`), so the `tag` filter is a containment test on the item's own row.

The name rules themselves (`normal_form`, `key_of`, `keys_with_parents`) are pure and live here too, so migrations
and every surface share them; what a surface refuses is `lev.tags.names`'s."""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlalchemy import and_, any_, bindparam, delete, func, literal, literal_column, or_, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.items import visible
from lev.store.models import user_items
from lev.store.reading_models import item_tags, tags
from lev.store.scope import Scope

MAX_NAME_CHARS = 64
MAX_PER_ITEM = 100
CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")  # not white space to `str.split`, never in a name


def normal_form(raw: str) -> str:
    """A name in its one form: a leading `#` dropped, each `/`-separated part trimmed with its inner white space
    collapsed, empty parts and parts `.` or `..` dropped (`" #Work // Clients "` is `Work/Clients`). May be empty.
    A `..` part, put in a URL's path (`/api/v1/items/{id}/tags/..`), would name another resource: a browser resolves
    it before sending (issue 47)."""
    parts = (" ".join(p.split()) for p in raw.strip().lstrip("#").split("/"))
    return "/".join(p for p in parts if p and p not in (".", ".."))


def clean_name(raw: str, *, lenient: bool = False) -> str | None:
    """The name, or None when nothing is left. Strict: None also for control characters or more than 64
    characters. Lenient (what imports bring): control characters dropped, a long name cut to 64 characters."""
    if CONTROL.search(raw):
        if not lenient:
            return None
        raw = CONTROL.sub("", raw)
    name = normal_form(raw)
    if len(name) > MAX_NAME_CHARS:
        if not lenient:
            return None
        name = normal_form(name[:MAX_NAME_CHARS])
    return name or None


def key_of(name: str) -> str:
    """What makes two spellings one tag (case-insensitive: the name case-folded)."""
    return name.casefold()


def parents(key: str) -> list[str]:
    """The key and those of its parents, outermost first (`a/b/c`: `a`, `a/b`, `a/b/c`)."""
    parts = key.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]


def keys_with_parents(keys: list[str]) -> list[str]:
    """What `user_items.tag_keys` holds for an item with these tag keys."""
    return sorted({p for k in keys for p in parents(k)})


# one statement for any number of items (an array parameter, not an IN list of its own length): built once,
# prepared once per connection
_NAMES_OF = (select(item_tags.c.item_id, tags.c.name).join(tags, tags.c.id == item_tags.c.tag_id)
             .where(item_tags.c.item_id == any_(bindparam("ids", type_=ARRAY(PG_UUID(as_uuid=True)))))
             .order_by(item_tags.c.item_id, tags.c.key))


async def names_of(session: AsyncSession, item_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[str]]:
    """The tag names of several items, each list in key order (items without tags are left out)."""
    if not item_ids:
        return {}
    rows = await session.execute(_NAMES_OF, {"ids": list(item_ids)})
    found: dict[uuid.UUID, list[str]] = {}
    for item_id, name in rows:
        found.setdefault(item_id, []).append(name)
    return found


async def ensure(session: AsyncSession, user_id: uuid.UUID, names: list[str]) -> dict[str, uuid.UUID]:
    """The user's tags of these (clean) names by key, made when missing; each is locked until the transaction ends.
    An existing tag keeps its spelling, unless no item carries it any more (then it takes the new one)."""
    wanted = {key_of(n): n for n in reversed(names)}  # the first spelling of a key in `names`
    if not wanted:
        return {}
    rows = [{"id": uuid.uuid4(), "user_id": user_id, "name": wanted[k], "key": k} for k in sorted(wanted)]
    ins = pg_insert(tags).values(rows)
    unused = ~select(literal_column("1")).where(item_tags.c.tag_id == tags.c.id).exists()
    ins = ins.on_conflict_do_update(
        index_elements=[tags.c.user_id, tags.c.key],
        set_={"name": func.coalesce(select(ins.excluded.name).where(unused).scalar_subquery(), tags.c.name)})
    found = await session.execute(ins.returning(tags.c.key, tags.c.id))
    return {k: i for k, i in found}


async def count_on(session: AsyncSession, item_id: uuid.UUID) -> int:
    return int((await session.execute(
        select(func.count()).select_from(item_tags).where(item_tags.c.item_id == item_id))).scalar_one())


async def add_to_item(session: AsyncSession, user_id: uuid.UUID, item_id: uuid.UUID, names: list[str]) -> bool:
    """Put these (clean) names on the item (the caller locked it as its owner's); whether any was new."""
    ids = await ensure(session, user_id, names)
    if not ids:
        return False
    if not await _link(session, item_id, list(ids.values())):
        return False
    await refresh_keys(session, [item_id])
    return True


async def _link(session: AsyncSession, item_id: uuid.UUID, tag_ids: list[uuid.UUID]) -> int:
    """Put these tags on the item; how many it did not carry yet."""
    if not tag_ids:
        return 0
    added = await session.execute(pg_insert(item_tags).values(
        [{"item_id": item_id, "tag_id": t} for t in tag_ids]).on_conflict_do_nothing().returning(item_tags.c.tag_id))
    return len(added.all())


async def replace_on_item(session: AsyncSession, user_id: uuid.UUID, item_id: uuid.UUID, names: list[str]) -> bool:
    """The item's tags become exactly these (clean) names; whether anything changed."""
    ids = await ensure(session, user_id, names)
    gone = (await session.execute(delete(item_tags).where(
        item_tags.c.item_id == item_id, item_tags.c.tag_id.notin_(list(ids.values())) if ids else literal(True))
        .returning(item_tags.c.tag_id))).all()
    added = await _link(session, item_id, list(ids.values()))
    changed = bool(gone) or bool(added)
    if changed:
        await refresh_keys(session, [item_id])
    return changed


async def remove_from_item(session: AsyncSession, user_id: uuid.UUID, item_id: uuid.UUID, key: str) -> bool:
    """Take the tag of this key (only it, not the tags nested in it) off the item; whether it was there."""
    mine = select(tags.c.id).where(tags.c.user_id == user_id, tags.c.key == key).scalar_subquery()
    gone = (await session.execute(delete(item_tags).where(item_tags.c.item_id == item_id, item_tags.c.tag_id == mine)
                                  .returning(item_tags.c.tag_id))).all()
    if not gone:
        return False
    await refresh_keys(session, [item_id])
    return True


_REFRESH = text("""
UPDATE user_items u SET tag_keys = coalesce((
    SELECT array_agg(DISTINCT array_to_string(parts[1:n], '/') COLLATE "C")
      FROM item_tags it JOIN tags t ON t.id = it.tag_id
     CROSS JOIN LATERAL string_to_array(t.key, '/') AS parts
     CROSS JOIN LATERAL generate_series(1, cardinality(parts)) AS n
     WHERE it.item_id = u.id), '{}')
 WHERE u.id = ANY(:ids)
""").bindparams(bindparam("ids", type_=ARRAY(user_items.c.id.type)))


async def refresh_keys(session: AsyncSession, item_ids: list[uuid.UUID]) -> None:
    """Rewrite `tag_keys` of these items from their tags (after every change of them)."""
    if item_ids:
        await session.execute(_REFRESH, {"ids": sorted(set(item_ids))})


def _in_subtree(key: str) -> Any:
    """'This tag is `key` or nested in it' (`key/...`: the keys from `key/` up to, not including, `key0`)."""
    return or_(tags.c.key == key, and_(tags.c.key >= key + "/", tags.c.key < key + "0"))


async def subtree(session: AsyncSession, user_id: uuid.UUID, key: str, *, lock: bool = False) -> list[dict[str, Any]]:
    """The user's tag of this key and the tags nested in it (id, name, key), in key order; locked with `lock`."""
    q = select(tags.c.id, tags.c.name, tags.c.key).where(tags.c.user_id == user_id, _in_subtree(key)) \
        .order_by(tags.c.key)
    if lock:
        q = q.with_for_update(of=tags)
    return [dict(r._mapping) for r in await session.execute(q)]


async def items_of(session: AsyncSession, tag_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    if not tag_ids:
        return []
    return list((await session.execute(
        select(item_tags.c.item_id).where(item_tags.c.tag_id.in_(tag_ids)).distinct())).scalars())


async def by_key(session: AsyncSession, user_id: uuid.UUID, key: str, *, lock: bool = False) -> dict[str, Any] | None:
    q = select(tags.c.id, tags.c.name, tags.c.key).where(tags.c.user_id == user_id, tags.c.key == key)
    if lock:
        q = q.with_for_update(of=tags)
    row = (await session.execute(q)).first()
    return dict(row._mapping) if row else None


async def move(session: AsyncSession, source: uuid.UUID, target: uuid.UUID) -> None:
    """Every item of tag `source` gets tag `target` instead (a merge); `source` is deleted."""
    await session.execute(pg_insert(item_tags).from_select(
        ["item_id", "tag_id"], select(item_tags.c.item_id, literal(target, user_items.c.id.type))
        .where(item_tags.c.tag_id == source)).on_conflict_do_nothing())
    await session.execute(delete(tags).where(tags.c.id == source))


async def rename(session: AsyncSession, tag_id: uuid.UUID, name: str) -> None:
    await session.execute(update(tags).where(tags.c.id == tag_id).values(name=name, key=key_of(name)))


async def delete_tags(session: AsyncSession, tag_ids: list[uuid.UUID]) -> None:
    if tag_ids:
        await session.execute(delete(tags).where(tags.c.id.in_(tag_ids)))


async def used_names(session: AsyncSession, user_id: uuid.UUID, limit: int = 2000) -> list[tuple[str, int]]:
    """The user's tags that some item carries and how many, most used first (tag suggestions)."""
    q = (select(tags.c.name, func.count().label("n")).join(item_tags, item_tags.c.tag_id == tags.c.id)
         .where(tags.c.user_id == user_id).group_by(tags.c.id, tags.c.name)
         .order_by(func.count().desc(), tags.c.key).limit(limit))
    return [(r.name, int(r.n)) for r in await session.execute(q)]


async def tag_counts(session: AsyncSession, scope: Scope) -> list[dict[str, Any]]:
    """The caller's own tags that items visible to the scope carry, each with how many of those items, in key order."""
    q = (select(tags.c.name, func.count().label("n"))
         .select_from(tags.join(item_tags, item_tags.c.tag_id == tags.c.id)
                      .join(user_items, user_items.c.id == item_tags.c.item_id))
         .where(tags.c.user_id == scope.user_id, visible(scope))
         .group_by(tags.c.id, tags.c.name, tags.c.key).order_by(tags.c.key))
    return [{"name": r.name, "count": int(r.n)} for r in await session.execute(q)]
