"""Whose work a job is: the user behind a content, an item, an import or a feed (the job queue's fair share)."""

from __future__ import annotations

import uuid
from typing import Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.import_models import imports
from lev.store.models import feeds, user_items

Subject = Literal["content", "item", "import", "feed"]


async def owner_of(session: AsyncSession, subject: Subject, subject_id: uuid.UUID) -> uuid.UUID | None:
    """The user the subject belongs to (a shared content: its first item's user), or None when it is gone."""
    if subject == "content":
        q = select(user_items.c.user_id).where(user_items.c.content_id == subject_id) \
            .order_by(user_items.c.created_at).limit(1)
    elif subject == "item":
        q = select(user_items.c.user_id).where(user_items.c.id == subject_id)
    elif subject == "import":
        q = select(imports.c.user_id).where(imports.c.id == subject_id)
    else:
        q = select(feeds.c.user_id).where(feeds.c.id == subject_id)
    found: uuid.UUID | None = (await session.execute(q)).scalar_one_or_none()
    return found
