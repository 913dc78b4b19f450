"""Published folders: a folder's public page (its slug), and what the page and its feed show (titles, links, saved
dates, excerpts of the folder's ready items)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.lifecycle import Status
from lev.store.models import contents, folders, item_folders, user_items
from lev.store.sharing_models import folder_publications

EXCERPT_SOURCE_CHARS = 1200  # read at most this much of an item's text; the excerpt is cut from it


async def of_folder(session: AsyncSession, folder_id: uuid.UUID) -> dict[str, Any] | None:
    row = (await session.execute(select(folder_publications).where(folder_publications.c.folder_id == folder_id)
                                 )).first()
    return dict(row._mapping) if row else None


async def publish(session: AsyncSession, folder_id: uuid.UUID, slug: str) -> dict[str, Any]:
    """The folder's publication: a new one under `slug`, or the one it has (publishing twice keeps the URL)."""
    await session.execute(pg_insert(folder_publications).values(folder_id=folder_id, slug=slug)
                          .on_conflict_do_nothing(index_elements=["folder_id"]))
    found = await of_folder(session, folder_id)
    assert found is not None
    return found


async def unpublish(session: AsyncSession, folder_id: uuid.UUID) -> bool:
    res = await session.execute(delete(folder_publications).where(folder_publications.c.folder_id == folder_id))
    return bool(res.rowcount)  # type: ignore[attr-defined]


async def by_slug(session: AsyncSession, slug: str) -> dict[str, Any] | None:
    """The published folder behind a slug (`folder_id`, `name`, `created_at` of the publication)."""
    row = (await session.execute(
        select(folders.c.id.label("folder_id"), folders.c.name, folder_publications.c.created_at)
        .join(folders, folders.c.id == folder_publications.c.folder_id)
        .where(folder_publications.c.slug == slug))).first()
    return dict(row._mapping) if row else None


async def shown_items(session: AsyncSession, folder_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    """The folder's ready items, newest first (by when they were filed into it): id, title, url, kind, saved and
    filed dates, and the first part of their text (only an excerpt is ever shown)."""
    q = (select(user_items.c.id, user_items.c.title, user_items.c.url, user_items.c.kind,
                user_items.c.created_at.label("saved_at"), item_folders.c.created_at.label("filed_at"),
                func.left(func.coalesce(contents.c.text, contents.c.transcript, ""),
                          EXCERPT_SOURCE_CHARS).label("text"))
         .select_from(item_folders.join(user_items, user_items.c.id == item_folders.c.item_id)
                      .join(contents, contents.c.id == user_items.c.content_id))
         .where(item_folders.c.folder_id == folder_id, user_items.c.status == Status.READY.value)
         .order_by(item_folders.c.created_at.desc(), user_items.c.created_at.desc(), user_items.c.id)
         .limit(limit))
    return [dict(r._mapping) for r in await session.execute(q)]
