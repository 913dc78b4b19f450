"""Search filters as data and as SQL conditions on `user_items`: one folder, one item, kinds, a site (a host and
its subdomains), a saved-at window, tags (each, or a tag nested in it). They narrow what the scope lets the caller
see (`store.scoped_sql`), inside the statements of every search mode, never after ranking."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Text, and_, bindparam, cast, exists, false, literal_column, or_
from sqlalchemy.dialects.postgresql import ARRAY

from lev.store.lifecycle import MEDIA_KINDS
from lev.store.models import contents, item_folders, user_items

# The kinds an item has; `page` is a web page saved as the user's browser rendered it (stored as kind `url`, so
# `url` finds those too); the documents Lev reads itself (`lev.core.mimes.FORMAT_KINDS`; `text` is one of them).
KINDS = ("url", "page", "text", "pdf", "image", *sorted(MEDIA_KINDS), "document", "presentation", "spreadsheet",
         "ebook", "markdown", "html", "email")


@dataclass(frozen=True)
class Filters:
    """What a search is narrowed to; every part optional, all of them ANDed. `site` is a lower-case host name
    (ASCII: an internationalised name in its xn-- form); `after` is inclusive, `before` exclusive."""

    folder_id: uuid.UUID | None = None
    item_id: uuid.UUID | None = None
    kinds: tuple[str, ...] = ()
    site: str | None = None
    after: dt.datetime | None = None
    before: dt.datetime | None = None
    tags: tuple[str, ...] = ()  # tag keys (`store.tags.key_of`), sorted: an item carries each, or one nested in it

    @property
    def empty(self) -> bool:
        return self == NONE


NONE = Filters()


def filter_where(f: Filters | None) -> list[Any]:
    """The conditions on `user_items` that the filters add (none for no filters). Their values are bound under
    fixed names (`f_…`), so every part of one statement compiled on its own names a filter's value alike
    (`store.scoped_sql.bound_params`)."""
    if f is None:
        return []
    conds: list[Any] = []
    if f.folder_id is not None:
        conds.append(exists().where(item_folders.c.item_id == user_items.c.id,
                                    item_folders.c.folder_id == bindparam("f_folder", f.folder_id)))
    if f.item_id is not None:
        conds.append(user_items.c.id == bindparam("f_item", f.item_id))
    if f.kinds:
        stored = sorted({k for k in f.kinds if k != "page"})
        either: list[Any] = [user_items.c.kind.in_(bindparam("f_kinds", stored, expanding=True))] if stored else []
        if "page" in f.kinds and "url" not in f.kinds:
            either.append(and_(user_items.c.kind == literal_column("'url'"), exists().where(
                contents.c.id == user_items.c.content_id, contents.c.owner_id.isnot(None))))
        conds.append(or_(*either) if either else false())
    if f.site is not None:
        # url_rhost (migration 0020): the host as lev_url_host gives it (lower case, no user info, port or trailing
        # dot), reversed, in byte order, stored with the item. The site and its subdomains are one range
        # ("gro.elpmaxe" and what starts "gro.elpmaxe."), read through the index user_items_url_rhost whatever the
        # plan (no LIKE whose prefix only a custom plan could use), and checked per row without parsing the URL.
        rhost = user_items.c.url_rhost
        rsite = f.site[::-1]
        conds.append(or_(rhost == bindparam("f_rsite", rsite), and_(rhost >= bindparam("f_rsite_lo", rsite + "."),
                                                                     rhost < bindparam("f_rsite_hi", rsite + "/"))))
    if f.after is not None:
        conds.append(user_items.c.created_at >= bindparam("f_after", f.after))
    if f.before is not None:
        conds.append(user_items.c.created_at < bindparam("f_before", f.before))
    if f.tags:
        # tag_keys (migration 0027) holds the item's tag keys and their parents: one containment test on the row the
        # scope reads anyway, answered by the GIN index user_items_tag_keys when the tags pick few items.
        conds.append(user_items.c.tag_keys.op("@>")(cast(bindparam("f_tags", list(f.tags)), ARRAY(Text))))
    return conds
