"""Files Lev keeps by their path (a ZIP's members, the files `lev sync` uploads): which item each path made and the
SHA-256 of the bytes it was made from, per user; the content an updated file leaves behind."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from sqlalchemy import delete, exists, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.import_models import source_files
from lev.store.models import contents, object_deletions, user_items


def _lock_key(user_id: uuid.UUID, path: str) -> int:
    digest = hashlib.sha256(b"lev-source-file:" + user_id.bytes + path.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def lock_path(session: AsyncSession, user_id: uuid.UUID, path: str) -> None:
    """Hold the user's path until the transaction ends (two uploads of one new path make one item, not two); taken
    before any row lock."""
    await session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key(user_id, path)})


_COLUMNS = (source_files.c.path, source_files.c.item_id, source_files.c.sha256, source_files.c.size_bytes,
            source_files.c.updated_at, user_items.c.status, user_items.c.created_at.label("item_created_at"))


async def get(session: AsyncSession, user_id: uuid.UUID, path: str, *, lock: bool = False) -> dict[str, Any] | None:
    """The user's file at `path` with its item's status, or None (none kept there, or its item was deleted)."""
    q = (select(*_COLUMNS).join(user_items, user_items.c.id == source_files.c.item_id)
         .where(source_files.c.user_id == user_id, source_files.c.path == path))
    if lock:
        q = q.with_for_update(of=source_files)
    row = (await session.execute(q)).first()
    return dict(row._mapping) if row else None


async def record(session: AsyncSession, user_id: uuid.UUID, path: str, item_id: uuid.UUID, sha256: str,
                 size: int) -> None:
    """The item `path` made now, from bytes of this SHA-256 (in the transaction that stored them)."""
    values = {"user_id": user_id, "path": path, "item_id": item_id, "sha256": sha256, "size_bytes": size}
    ins = pg_insert(source_files).values(**values, updated_at=func.now())
    await session.execute(ins.on_conflict_do_update(
        index_elements=[source_files.c.user_id, source_files.c.path],
        set_={"item_id": ins.excluded.item_id, "sha256": ins.excluded.sha256,
              "size_bytes": ins.excluded.size_bytes, "updated_at": func.now()}))


async def listing(session: AsyncSession, user_id: uuid.UUID, prefix: str, after: str | None,
                  limit: int) -> list[dict[str, Any]]:
    """The user's files whose path starts with `prefix`, in byte order of their paths, after `after`."""
    conds = [source_files.c.user_id == user_id]
    if prefix:
        conds.append(source_files.c.path.startswith(prefix, autoescape=True))
    if after is not None:
        conds.append(source_files.c.path > after)
    rows = await session.execute(
        select(*_COLUMNS).join(user_items, user_items.c.id == source_files.c.item_id).where(*conds)
        .order_by(source_files.c.path).limit(limit))
    return [dict(r._mapping) for r in rows]


async def drop_content(session: AsyncSession, content_id: uuid.UUID) -> None:
    """Delete a content no item points at any more (an updated file's old text: its chunks go with it) and queue its
    stored object for the drain."""
    paths = (await session.execute(
        delete(contents).where(contents.c.id == content_id, ~exists().where(user_items.c.content_id == contents.c.id))
        .returning(contents.c.object_path))).scalars().all()
    kept = [p for p in paths if p]
    if kept:
        await session.execute(pg_insert(object_deletions).values([{"path": p, "attempts": 0} for p in kept])
                              .on_conflict_do_nothing())
