"""The caller's scope inside search statements: SQL parts to embed in a larger `text()` statement (the visible
contents, the newest visible item of a content, a per-row visibility probe), with the scope's ids as named
parameters. Scopes of the same shape give the same text, so every user's searches share one prepared statement.
A search's filters (`store.filters`) narrow the same parts; the scope rules live here only."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from sqlalchemy import bindparam, literal_column, select, true, union_all
from sqlalchemy.dialects.postgresql import psycopg2
from sqlalchemy.engine.interfaces import BindTyping

from lev.store.filters import Filters, filter_where
from lev.store.items import visible
from lev.store.lifecycle import Status
from lev.store.models import contents, item_folders, user_items
from lev.store.scope import Scope


@dataclass(frozen=True)
class Bound:
    """SQL text to embed in a statement, and the values of its named parameters (the scope's ids)."""

    sql: str
    params: dict[str, Any]


def bound_params(*parts: Bound) -> dict[str, Any]:
    """The parameters of several embedded parts as one dict. Each part is compiled on its own, so the same name
    must mean the same value in all of them (they are all built from one scope): anything else is refused."""
    out: dict[str, Any] = {}
    for part in parts:
        for name, value in part.params.items():
            if name in out and out[name] != value:
                raise ValueError(f"parameter {name} bound to two values in one statement")
            out[name] = value
    return out


@lru_cache(maxsize=4096)
def item_sql(scope: Scope, filters: Filters | None) -> Bound:
    """The newest item visible to the caller that holds content `c.content_id` (correlated subquery)."""
    q: Any = (select(user_items.c.id.label("item_id"), user_items.c.title.label("item_title"),
                     user_items.c.url.label("item_url"), user_items.c.kind.label("item_kind"),
                     user_items.c.created_at.label("item_created"),
                     select(contents.c.object_path.isnot(None)).where(contents.c.id == user_items.c.content_id)
                     .scalar_subquery().label("item_media"))
              .where(user_items.c.content_id == literal_column("c.content_id"), *visible_where(scope, filters))
              .order_by(user_items.c.created_at.desc()).limit(1))
    return sql_text(q)


@lru_cache(maxsize=4096)
def scope_sql(scope: Scope, filters: Filters | None, by_folder: bool = False) -> Bound:
    """The visible-content subquery. With shared folders in reach, the caller's own items and the shared folders'
    items are two branches of one UNION ALL (each read through its own index: the user's items, the folders'
    memberships) rather than one OR that only a scan of every item could answer. The filters narrow both.
    `by_folder`: a folder filter's own items are read from the folder's memberships (`_own_contents`)."""
    shared = scope.shared_in_scope
    if not shared:
        return sql_text(_own_contents(scope, filters, by_folder))
    own = _own_contents(scope.own_only(), filters, by_folder)
    folder_id = filters.folder_id if filters is not None else None
    folders = sorted(shared if folder_id is None else shared & {folder_id})
    rest = replace(filters, folder_id=None) if filters is not None else None  # the folder is chosen just above
    filed = (select(user_items.c.content_id)
             .select_from(item_folders.join(user_items, user_items.c.id == item_folders.c.item_id))
             .where(item_folders.c.folder_id.in_(bindparam("shared_filed", folders, expanding=True)) if folders
                    else literal_column("false"),
                    user_items.c.user_id != scope.user_id,  # the caller's own are the first branch's
                    user_items.c.in_kb.is_(True), user_items.c.status == Status.READY.value,
                    *filter_where(rest)))
    return sql_text(union_all(own, filed))


def _own_contents(scope: Scope, filters: Filters | None, by_folder: bool) -> Any:
    """The contents of the items `visible_where` lets through. `by_folder`, narrowed to a folder: read from the
    folder's memberships, each item by its key. The planner, counting every item of the user as a candidate,
    would rather scan them all and hash the folder (a 5 % folder of 41,692 items: 10.2 ms, this way 2.9; the
    OFFSET 0 keeps the per-item lookup as written). The planner takes such a subquery for one row: a caller that
    joins on it should not make it distinct (store.search's `sc`, docs/decisions.md)."""
    if not by_folder or filters is None or filters.folder_id is None:
        return select(user_items.c.content_id).where(*visible_where(scope, filters))
    rest = replace(filters, folder_id=None)
    item = (select(user_items.c.content_id)
            .where(user_items.c.id == item_folders.c.item_id, *visible_where(scope, rest))
            .offset(literal_column("0")).lateral("filed_item"))
    return (select(item.c.content_id).select_from(item_folders.join(item, true()))
            .where(item_folders.c.folder_id == bindparam("f_folder", filters.folder_id)))


@lru_cache(maxsize=4096)
def probe_sql(scope: Scope, filters: Filters | None, content_col: str) -> Bound:
    """'The content in `content_col` is visible': a correlated probe, evaluated row by row (never hashed whole)."""
    q: Any = (select(literal_column("true")).select_from(user_items)
              .where(user_items.c.content_id == literal_column(content_col), *visible_where(scope, filters))
              .limit(1))
    inner = sql_text(q)
    return Bound(f"({inner.sql})", inner.params)


def visible_where(scope: Scope, filters: Filters | None) -> list[Any]:
    """The conditions 'this user item is searchable by the caller': visible, in the KB, ready (and what the
    search's filters ask: a folder, an item, kinds, a site, a saved-at window)."""
    conds: list[Any] = [visible(scope), user_items.c.in_kb.is_(True), user_items.c.status == Status.READY.value]
    return conds + filter_where(filters)


_NAMED = psycopg2.dialect(paramstyle="named")  # renders `:name` as text() reads them: no `::UUID` bind casts
_NAMED.bind_typing = BindTyping.NONE


def sql_text(q: Any) -> Bound:
    """A statement as SQL text to embed in a larger `text()` statement, its values (the scope's ids, 'ready') as
    named parameters: scopes of the same shape give the same text, so every user's searches share one prepared
    statement (and, with generic plans, one plan) per connection."""
    compiled = q.compile(dialect=_NAMED, compile_kwargs={"render_postcompile": True})
    return Bound(str(compiled), dict(compiled.params))
