"""The reads of a library export: every folder, the visible items page by page (keyset order), their outputs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.items import tag_names_sql, visible
from lev.store.models import contents, folders, item_folders, outputs, user_items
from lev.store.reading_models import archives
from lev.store.scope import Scope


async def all_folders(session: AsyncSession, user_id: uuid.UUID) -> list[dict[str, Any]]:
    rows = await session.execute(select(folders.c.id, folders.c.name, folders.c.created_at)
                                 .where(folders.c.user_id == user_id).order_by(folders.c.created_at, folders.c.id))
    return [dict(r._mapping) for r in rows]


async def items_page(session: AsyncSession, scope: Scope, after: tuple[datetime, uuid.UUID] | None,
                     limit: int) -> list[dict[str, Any]]:
    """Visible items oldest first, after the keyset `after`: url or (for items without one) their text, title,
    metadata (the content's with the user's own over it), every folder of the user's own (a folder shared with
    them is not in their export), tags, reading state, flags, status, and their archived copy's date and size."""
    own_folders = select(folders.c.id).where(folders.c.user_id == scope.user_id)
    memberships = (select(func.coalesce(func.array_agg(item_folders.c.folder_id), []))
                   .where(item_folders.c.item_id == user_items.c.id, item_folders.c.folder_id.in_(own_folders))
                   .scalar_subquery())
    q = (select(user_items.c.id, user_items.c.kind, user_items.c.url, user_items.c.title, user_items.c.in_kb,
                user_items.c.archived, user_items.c.status, user_items.c.error, user_items.c.created_at,
                func.coalesce(contents.c.text, contents.c.transcript).label("text"),
                contents.c.metadata.op("||")(user_items.c.metadata).label("metadata"),
                memberships.label("folder_ids"), tag_names_sql().label("tags"), user_items.c.read_at,
                user_items.c.progress, archives.c.saved_at.label("archive_saved_at"),
                archives.c.size_bytes.label("archive_bytes"))
         .join(contents, contents.c.id == user_items.c.content_id)
         .outerjoin(archives, and_(archives.c.content_id == user_items.c.content_id,
                                   archives.c.status == "ready"))
         .where(visible(scope))
         .order_by(user_items.c.created_at, user_items.c.id).limit(limit))
    if after is not None:
        q = q.where(tuple_(user_items.c.created_at, user_items.c.id) > tuple_(*after))
    return [dict(r._mapping) for r in await session.execute(q)]


async def outputs_of(session: AsyncSession, item_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[dict[str, Any]]]:
    found: dict[uuid.UUID, list[dict[str, Any]]] = {}
    if not item_ids:
        return found
    rows = await session.execute(
        select(outputs.c.item_id, outputs.c.kind, outputs.c.content, outputs.c.generator, outputs.c.created_at)
        .where(outputs.c.item_id.in_(item_ids)).order_by(outputs.c.created_at, outputs.c.kind))
    for r in rows:
        found.setdefault(r.item_id, []).append(dict(r._mapping))
    return found
