"""Archived copies of pages, one per content: the page's HTML kept with a new content until the worker has made its
snapshot, then where the snapshot lives in the object store and what went into it. An item's copy is its content's,
seen through the item's visibility (`store.items.visible`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.items import visible
from lev.store.models import user_items
from lev.store.reading_models import archives

PENDING, READY, FAILED = "pending", "ready", "failed"


async def add_pending(session: AsyncSession, content_id: uuid.UUID, *, url: str, source: bytes,
                      charset: str | None) -> None:
    """A new content's page, to be archived by the worker (in the transaction that stores the content)."""
    await session.execute(pg_insert(archives).values(
        content_id=content_id, status=PENDING, url=url, source=source, charset=charset, resources=0, skipped=[])
        .on_conflict_do_nothing())


async def pending(session: AsyncSession, content_id: uuid.UUID) -> dict[str, Any] | None:
    """A content's page still to be archived (its HTML, URL and charset), or None."""
    row = (await session.execute(
        select(archives.c.source, archives.c.url, archives.c.charset)
        .where(archives.c.content_id == content_id, archives.c.status == PENDING))).first()
    return dict(row._mapping) if row else None


async def finish(session: AsyncSession, content_id: uuid.UUID, *, object_path: str, size: int, resources: int,
                 skipped: list[dict[str, str]]) -> bool:
    """The snapshot is stored: the page's HTML goes; False when the content was deleted meanwhile (or archived)."""
    done = await session.execute(
        update(archives).where(archives.c.content_id == content_id, archives.c.status == PENDING)
        .values(status=READY, source=None, object_path=object_path, size_bytes=size, resources=resources,
                skipped=skipped, error=None, saved_at=func.now()).returning(archives.c.content_id))
    return done.first() is not None


async def fail(session: AsyncSession, content_id: uuid.UUID, error: str) -> None:
    await session.execute(update(archives).where(archives.c.content_id == content_id, archives.c.status == PENDING)
                          .values(status=FAILED, source=None, error=error[:1000]))


async def of_item(session: AsyncSession, scope: Any, item_id: uuid.UUID) -> dict[str, Any] | None:
    """The archived copy of a visible item's content (any status), or None (not visible, or none was kept)."""
    row = (await session.execute(
        select(archives.c.status, archives.c.object_path, archives.c.size_bytes, archives.c.saved_at,
               archives.c.url, archives.c.resources, archives.c.skipped, archives.c.error, user_items.c.title)
        .join(user_items, user_items.c.content_id == archives.c.content_id)
        .where(user_items.c.id == item_id, visible(scope)))).first()
    return dict(row._mapping) if row else None


async def due(session: AsyncSession, settled_before: datetime, limit: int = 200) -> list[uuid.UUID]:
    """Pages still to be archived since before `settled_before` (the reconciler queues their job again)."""
    return list((await session.execute(
        select(archives.c.content_id).where(archives.c.status == PENDING, archives.c.created_at < settled_before)
        .order_by(archives.c.created_at).limit(limit))).scalars())
