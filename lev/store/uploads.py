"""Pending uploads (table `uploads`), the object-deletion queue (`object_deletions`) and their sweeps."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.models import contents, item_folders, object_deletions, uploads, user_items


async def create_upload(session: AsyncSession, *, path: str, user_id: uuid.UUID, mime: str, size: int, filename: str,
                 created_at: datetime) -> None:
    """Record an upload issued by the signed-URL step."""
    await session.execute(insert(uploads).values(path=path, user_id=user_id, mime=mime, size_bytes=size,
                                                 filename=filename, created_at=created_at))


async def get_upload(session: AsyncSession, path: str, *, for_update: bool = False) -> dict[str, Any] | None:
    q = select(uploads).where(uploads.c.path == path)
    if for_update:
        q = q.with_for_update()
    row = (await session.execute(q)).first()
    return dict(row._mapping) if row else None


async def set_item(session: AsyncSession, path: str, item_id: uuid.UUID) -> None:
    await session.execute(update(uploads).where(uploads.c.path == path).values(item_id=item_id))


async def forget(session: AsyncSession, path: str) -> None:
    """Drop an upload record (its object is queued for deletion by the caller)."""
    await session.execute(delete(uploads).where(uploads.c.path == path))


async def item_state(session: AsyncSession, item_id: uuid.UUID) -> dict[str, Any] | None:
    """The item an upload produced (for idempotent finalize), or None when it was deleted."""
    row = (await session.execute(
        select(user_items.c.id, user_items.c.content_id, user_items.c.kind, user_items.c.status,
               user_items.c.transcription_status).where(user_items.c.id == item_id)
    )).first()
    return dict(row._mapping) if row else None


async def first_folder(session: AsyncSession, item_id: uuid.UUID) -> uuid.UUID | None:
    """One folder of the item (an upload's item is in at most the one it was auto-filed into)."""
    q = select(item_folders.c.folder_id).where(item_folders.c.item_id == item_id).limit(1)
    return (await session.execute(q)).scalar()


async def queue_deletion(session: AsyncSession, paths: list[str]) -> None:
    """Queue stored objects for the background drain (idempotent per path)."""
    if paths:
        await session.execute(pg_insert(object_deletions).values([{"path": p, "attempts": 0} for p in paths])
                              .on_conflict_do_nothing())


async def expire_before(session: AsyncSession, cutoff: datetime) -> list[str]:
    """Delete upload records older than `cutoff`; queue the objects no content record uses. Returns paths queued."""
    rows = (await session.execute(
        delete(uploads).where(uploads.c.created_at < cutoff).returning(uploads.c.path)
    )).scalars().all()
    if not rows:
        return []
    used = set((await session.execute(
        select(contents.c.object_path).where(contents.c.object_path.in_(rows))
    )).scalars())
    orphans = [p for p in rows if p not in used]
    await queue_deletion(session, orphans)
    return orphans


async def pending_deletions(session: AsyncSession, limit: int = 200) -> list[dict[str, Any]]:
    """Queued object deletions, fewest attempts first; locked rows (another drain) are skipped."""
    rows = await session.execute(
        select(object_deletions.c.path, object_deletions.c.attempts)
        .order_by(object_deletions.c.attempts, object_deletions.c.queued_at)
        .limit(limit).with_for_update(skip_locked=True)
    )
    return [dict(r._mapping) for r in rows]


async def still_referenced(session: AsyncSession, path: str) -> bool:
    """True when a content record (re)uses the path, so the object must stay."""
    return bool((await session.execute(select(exists().where(contents.c.object_path == path)))).scalar())


async def deletion_done(session: AsyncSession, path: str) -> None:
    await session.execute(delete(object_deletions).where(object_deletions.c.path == path))


async def deletion_failed(session: AsyncSession, path: str, error: str) -> None:
    await session.execute(update(object_deletions).where(object_deletions.c.path == path)
                          .values(attempts=object_deletions.c.attempts + 1, last_error=error[:1000]))
