"""Content records (shared per canonical URL), their chunks, and the user items that point at them."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from store.models import chunks, contents, folders, item_folders, outputs, user_items


async def by_canonical_url(session: AsyncSession, canonical: str) -> dict[str, Any] | None:
    """The shared content record of a URL, locked so it cannot be deleted before the caller's new item is stored."""
    row = (await session.execute(
        select(contents.c.id, contents.c.status, contents.c.title, contents.c.kind)
        .where(contents.c.canonical_url == canonical).with_for_update(read=True, key_share=True)
    )).first()
    return dict(row._mapping) if row else None


async def create(
    session: AsyncSession, *, kind: str, title: str | None, text: str | None, url: str | None = None,
    canonical_url: str | None = None, metadata: dict[str, Any] | None = None, status: str = "ready",
    mime: str | None = None, object_path: str | None = None, size_bytes: int | None = None,
    duration_sec: float | None = None, transcript: str | None = None,
) -> uuid.UUID | None:
    """Insert a content record; for a canonical URL someone stored meanwhile, returns None (caller reuses)."""
    content_id = uuid.uuid4()
    stmt = pg_insert(contents).values(
        id=content_id, kind=kind, title=title, text=text, url=url, canonical_url=canonical_url,
        metadata=metadata or {}, status=status, mime=mime, object_path=object_path, size_bytes=size_bytes,
        duration_sec=duration_sec, transcript=transcript,
    )
    if canonical_url is not None:
        stmt = stmt.on_conflict_do_nothing(index_elements=["canonical_url"],
                                           index_where=contents.c.canonical_url.isnot(None))
    res = await session.execute(stmt.returning(contents.c.id))
    return res.scalar_one_or_none()


async def get(session: AsyncSession, content_id: uuid.UUID) -> dict[str, Any] | None:
    """The whole content record, or None."""
    row = (await session.execute(select(contents).where(contents.c.id == content_id))).first()
    return dict(row._mapping) if row else None


async def auto_transform_items(session: AsyncSession, content_id: uuid.UUID) -> list[uuid.UUID]:
    """The content's items that asked for AI transforms."""
    q = select(user_items.c.id).where(user_items.c.content_id == content_id, user_items.c.auto_transform.is_(True))
    return list((await session.execute(q)).scalars())


async def add_chunks(session: AsyncSession, content_id: uuid.UUID, title: str | None, bodies: list[str],
                     vectors: list[Any], times: list[tuple[float, float]] | None = None) -> int:
    """Insert a content's chunks; `times` gives each its (start, end) seconds in a recording."""
    if not bodies:
        return 0
    spans: list[tuple[float | None, float | None]] = list(times) if times else [(None, None)] * len(bodies)
    # One multi-row INSERT statement, so the BM25 maintenance trigger fires once per content.
    await session.execute(insert(chunks).values([
        {"id": uuid.uuid4(), "content_id": content_id, "ord": i, "title": title, "text": body,
         "embedding": np.asarray(vec, dtype=np.float32), "start_sec": span[0], "end_sec": span[1]}
        for i, (body, vec, span) in enumerate(zip(bodies, vectors, spans, strict=True))
    ]))
    return len(bodies)


async def update_content(session: AsyncSession, content_id: uuid.UUID, **values: Any) -> None:
    await session.execute(update(contents).where(contents.c.id == content_id).values(**values))


async def create_item(
    session: AsyncSession, *, user_id: uuid.UUID, content_id: uuid.UUID, kind: str, title: str | None,
    url: str | None, in_kb: bool, auto_transform: bool, status: str = "ready",
    transcription_status: str = "not_required", folder_id: uuid.UUID | None = None,
    created_by: uuid.UUID | None = None,
) -> uuid.UUID | None:
    """A new user item (filed into `folder_id`); None when that folder was deleted while the request ran."""
    if folder_id is not None and not await lock_folder(session, user_id, folder_id):
        return None
    item_id = uuid.uuid4()
    await session.execute(insert(user_items).values(
        id=item_id, user_id=user_id, content_id=content_id, kind=kind, title=title, url=url, in_kb=in_kb,
        archived=False, status=status, transcription_status=transcription_status, auto_transform=auto_transform,
        created_by_token=created_by,
    ))
    if folder_id is not None:
        await session.execute(insert(item_folders).values(item_id=item_id, folder_id=folder_id))
    return item_id


async def lock_folder(session: AsyncSession, user_id: uuid.UUID, folder_id: uuid.UUID) -> bool:
    """Whether the user's folder exists; it then cannot be deleted before the transaction ends."""
    return (await session.execute(
        select(folders.c.id).where(folders.c.id == folder_id, folders.c.user_id == user_id)
        .with_for_update(read=True, key_share=True)
    )).first() is not None


async def items_of_content(session: AsyncSession, content_id: uuid.UUID) -> list[uuid.UUID]:
    return list((await session.execute(select(user_items.c.id).where(user_items.c.content_id == content_id)))
                .scalars())


async def set_items_status(session: AsyncSession, content_id: uuid.UUID, **values: Any) -> None:
    await session.execute(update(user_items).where(user_items.c.content_id == content_id)
                          .values(updated_at=func.now(), **values))


async def mark_failed_if_processing(session: AsyncSession, content_id: uuid.UUID, reason: str, *,
                                    transcription: bool) -> bool:
    """Mark a content still `processing` (and its items) failed with `reason`; False if it had moved on."""
    if await lock_with_items(session, content_id) != "processing":
        return False
    done = (await session.execute(
        update(contents).where(contents.c.id == content_id, contents.c.status == "processing")
        .values(status="failed", error=reason[:1000]).returning(contents.c.id))).first()
    if done is None:
        return False
    extra = {"transcription_status": "failed"} if transcription else {}
    await set_items_status(session, content_id, status="failed", error=reason[:1000], **extra)
    return True


async def lock_with_items(session: AsyncSession, content_id: uuid.UUID) -> str | None:
    """Lock the content's items, then the content, for a write to both; the content's status (None when it is
    gone).

    Every writer takes its row locks in one order: folders, user items, contents, and the BM25 statistics row
    (taken by the chunks trigger) last. An item delete locks its item and then its content; a job finishing the
    content must not hold the content while it waits for an item, or the two deadlock.
    """
    await session.execute(select(user_items.c.id).where(user_items.c.content_id == content_id)
                          .order_by(user_items.c.id).with_for_update(key_share=True))
    row = (await session.execute(select(contents.c.status).where(contents.c.id == content_id)
                                 .with_for_update())).first()
    return None if row is None else str(row.status)


async def lock_unfinished(session: AsyncSession, content_id: uuid.UUID) -> bool:
    """Lock the content (after its items) for its finishing write; False unless it still exists and is
    `processing` (a job that finds it finished or deleted stores nothing, so a repeated run never adds chunks
    twice or charges twice)."""
    return await lock_with_items(session, content_id) == "processing"


async def has_outputs(session: AsyncSession, item_id: uuid.UUID) -> bool:
    return (await session.execute(select(outputs.c.id).where(outputs.c.item_id == item_id).limit(1))).first() \
        is not None


async def unfinished(session: AsyncSession, settled_before: Any) -> list[dict[str, Any]]:
    """Contents still `processing` (created before `settled_before`) and what finishing them needs: the job
    name and its arguments, decided from the content itself (the database is the record of unfinished work)."""
    pending_user = (
        select(user_items.c.user_id)
        .where(user_items.c.content_id == contents.c.id, user_items.c.transcription_status == "pending")
        .order_by(user_items.c.created_at).limit(1).scalar_subquery()
    )
    rows = (await session.execute(
        select(contents.c.id, contents.c.kind, contents.c.object_path, contents.c.text, contents.c.transcript,
               pending_user.label("pending_user"))
        .where(contents.c.status == "processing", contents.c.created_at < settled_before)
        .order_by(contents.c.created_at).limit(500)
    )).all()
    work: list[dict[str, Any]] = []
    for r in rows:
        if r.pending_user is not None and not r.transcript:
            work.append({"job": "transcribe_content", "args": [str(r.id), str(r.pending_user)]})
        elif r.kind in ("pdf", "image") and r.object_path and not (r.text or "").strip():
            work.append({"job": "extract_document", "args": [str(r.id)]})
        else:
            work.append({"job": "process_content", "args": [str(r.id)]})
    return work


async def item_for_transform(session: AsyncSession, item_id: uuid.UUID, *,
                             lock: bool = False) -> dict[str, Any] | None:
    """The item's title and text; with `lock`, the item cannot be deleted before the transaction ends."""
    q = (select(user_items.c.id, user_items.c.title, contents.c.text, contents.c.transcript)
         .join(contents, contents.c.id == user_items.c.content_id).where(user_items.c.id == item_id))
    if lock:
        q = q.with_for_update(read=True, key_share=True, of=user_items)
    row = (await session.execute(q)).first()
    return dict(row._mapping) if row else None


async def add_outputs(session: AsyncSession, item_id: uuid.UUID, produced: list[dict[str, Any]]) -> None:
    if produced:
        await session.execute(insert(outputs), [{"id": uuid.uuid4(), "item_id": item_id, **o} for o in produced])

