"""Pages captured in a user's browser: contents owned by one user (`owner_id`), found again by their canonical URL
(`owner_url`) for that user only. Such a content is never shared: its `canonical_url` stays NULL."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, exists, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.items import visible
from lev.store.models import contents, outputs, user_items
from lev.store.scope import Scope


async def lock_url(session: AsyncSession, user_id: uuid.UUID, owner_url: str) -> None:
    """Serialise the user's captures of one URL until the transaction ends (taken before any row lock)."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 34))"),
                          {"k": f"capture\n{user_id}\n{owner_url}"})


async def has_owned(session: AsyncSession, user_id: uuid.UUID, owner_url: str) -> bool:
    """Whether the user captured this URL at all (one indexed read, no lock)."""
    return (await session.execute(select(contents.c.id).where(
        contents.c.owner_id == user_id, contents.c.owner_url == owner_url).limit(1))).first() is not None


async def lock_own_capture_item(session: AsyncSession, scope: Scope, owner_url: str) -> dict[str, Any] | None:
    """The caller's own item (never another user's, even one on the caller's capture in a shared folder) of the
    caller's capture of this URL, within its scope (`item_id`, `content_id`, `status`, `transcription_status`): the
    item and then its content locked (the order every writer takes); None when there is none."""
    owned = select(contents.c.id).where(contents.c.owner_id == scope.user_id, contents.c.owner_url == owner_url)
    item = (await session.execute(
        select(user_items.c.id, user_items.c.content_id, user_items.c.status, user_items.c.transcription_status)
        .where(user_items.c.content_id.in_(owned.scalar_subquery()), user_items.c.user_id == scope.user_id,
               visible(scope))
        .order_by(user_items.c.created_at, user_items.c.id).limit(1).with_for_update(of=user_items)
    )).first()
    if item is None:
        return None
    locked = (await session.execute(select(contents.c.id).where(contents.c.id == item.content_id)
                                    .with_for_update())).first()
    return {"item_id": item.id, "content_id": item.content_id, "status": item.status,
            "transcription_status": item.transcription_status} if locked else None


async def create_owned(session: AsyncSession, *, user_id: uuid.UUID, owner_url: str, url: str, title: str | None,
                       text: str, metadata: dict[str, Any], status: str,
                       outline: dict[str, Any] | None = None) -> uuid.UUID:
    """Insert a captured content owned by the user."""
    content_id = uuid.uuid4()
    await session.execute(insert(contents).values(
        id=content_id, kind="url", title=title, text=text, url=url, canonical_url=None, metadata=metadata,
        status=status, owner_id=user_id, owner_url=owner_url, outline=outline))
    return content_id


async def repoint_item(session: AsyncSession, item_id: uuid.UUID, content_id: uuid.UUID, **values: Any) -> None:
    """Move the user's item onto the new capture, dropping the outputs of the old text (its transform is due
    again)."""
    await session.execute(delete(outputs).where(outputs.c.item_id == item_id))
    await session.execute(update(user_items).where(user_items.c.id == item_id)
                          .values(content_id=content_id, updated_at=func.now(), transformed_at=None, **values))


async def delete_unreferenced(session: AsyncSession, content_id: uuid.UUID) -> None:
    """Delete a content no item points at any more (its chunks go with it)."""
    await session.execute(delete(contents).where(
        contents.c.id == content_id, ~exists().where(user_items.c.content_id == contents.c.id)))
