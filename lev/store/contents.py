"""Content records (shared per canonical URL), their chunks and their items' AI outputs."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
from sqlalchemy import cast, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.lifecycle import Status, Transcription
from lev.store.locations import Location
from lev.store.models import chunk_locations, chunks, contents, outputs, user_items


async def by_canonical_url(session: AsyncSession, canonical: str) -> dict[str, Any] | None:
    """The shared content record of a URL, locked so it cannot be deleted before the caller's new item is stored."""
    row = (await session.execute(
        select(contents.c.id, contents.c.status, contents.c.title, contents.c.kind)
        .where(contents.c.canonical_url == canonical).with_for_update(read=True, key_share=True)
    )).first()
    return dict(row._mapping) if row else None


async def canonical_url_taken(session: AsyncSession, canonical: str) -> bool:
    """Whether a content record holds this canonical URL (a plain read, no lock)."""
    return (await session.execute(select(contents.c.id).where(contents.c.canonical_url == canonical))).first() \
        is not None


async def create_content(
    session: AsyncSession, *, kind: str, title: str | None, text: str | None, url: str | None = None,
    canonical_url: str | None = None, metadata: dict[str, Any] | None = None, status: Status,
    mime: str | None = None, object_path: str | None = None, size_bytes: int | None = None,
    duration_sec: float | None = None, transcript: str | None = None, outline: dict[str, Any] | None = None,
) -> uuid.UUID | None:
    """Insert a content record; for a canonical URL someone stored meanwhile, returns None (caller reuses)."""
    content_id = uuid.uuid4()
    stmt = pg_insert(contents).values(
        id=content_id, kind=kind, title=title, text=text, url=url, canonical_url=canonical_url,
        metadata=metadata or {}, status=status, mime=mime, object_path=object_path, size_bytes=size_bytes,
        duration_sec=duration_sec, transcript=transcript, outline=outline,
    )
    if canonical_url is not None:
        stmt = stmt.on_conflict_do_nothing(index_elements=["canonical_url"],
                                           index_where=contents.c.canonical_url.isnot(None))
    res = await session.execute(stmt.returning(contents.c.id))
    return res.scalar_one_or_none()


async def get_content(session: AsyncSession, content_id: uuid.UUID) -> dict[str, Any] | None:
    """The whole content record, or None."""
    row = (await session.execute(select(contents).where(contents.c.id == content_id))).first()
    return dict(row._mapping) if row else None


async def add_chunks(session: AsyncSession, content_id: uuid.UUID, title: str | None, bodies: list[str],
                     vectors: list[Any], times: list[tuple[float, float]] | None = None,
                     places: list[Location] | None = None) -> int:
    """Insert a content's chunks; `times` gives each its (start, end) seconds in a recording, `places` where it
    stands in the content's text."""
    if not bodies:
        return 0
    spans: list[tuple[float | None, float | None]] = list(times) if times else [(None, None)] * len(bodies)
    ids = [uuid.uuid4() for _ in bodies]
    # One multi-row INSERT statement, so the BM25 maintenance trigger fires once per content.
    await session.execute(insert(chunks).values([
        {"id": chunk_id, "content_id": content_id, "ord": i, "title": title, "text": body,
         "embedding": np.asarray(vec, dtype=np.float32), "start_sec": span[0], "end_sec": span[1]}
        for i, (chunk_id, body, vec, span) in enumerate(zip(ids, bodies, vectors, spans, strict=True))
    ]))
    at = list(places) if places and len(places) == len(bodies) else [Location(None, None)] * len(bodies)
    await session.execute(insert(chunk_locations).values([
        {"chunk_id": chunk_id, "char_start": p.char_start, "char_end": p.char_end, "page": p.page,
         "page_end": p.page_end, "heading": p.heading, "slide": p.slide, "sheet": p.sheet, "row_start": p.row_start,
         "row_end": p.row_end}
        for chunk_id, p in zip(ids, at, strict=True)
    ]))
    return len(bodies)


async def update_content(session: AsyncSession, content_id: uuid.UUID, **values: Any) -> None:
    await session.execute(update(contents).where(contents.c.id == content_id).values(**values))


async def status_of(session: AsyncSession, content_id: uuid.UUID) -> str | None:
    """The content's status, or None once it is gone."""
    found: str | None = (await session.execute(select(contents.c.status).where(contents.c.id == content_id))
                         ).scalar_one_or_none()
    return found


async def mark_truncated(session: AsyncSession, content_id: uuid.UUID, *, indexed_chars: int, chunks: int) -> None:
    """Say in the content's metadata that only its first `chunks` chunks (`indexed_chars` of its normalised text)
    are indexed: the cap on chunks per item stopped the rest."""
    note = {"truncated": True, "indexed_chars": indexed_chars, "indexed_chunks": chunks}
    await session.execute(update(contents).where(contents.c.id == content_id)
                          .values(metadata=contents.c.metadata.op("||")(cast(note, JSONB))))


async def lock_with_items(session: AsyncSession, content_id: uuid.UUID) -> dict[str, Any] | None:
    """Lock the content's items, then the content, for a write to both; the content's status and kind (None when it
    is gone).

    Every writer takes its row locks in one order: folders, user items, contents, and the BM25 statistics row
    (taken by the chunks trigger) last. An item delete locks its item and then its content; a job finishing the
    content must not hold the content while it waits for an item, or the two deadlock.
    """
    await session.execute(select(user_items.c.id).where(user_items.c.content_id == content_id)
                          .order_by(user_items.c.id).with_for_update(key_share=True))
    row = (await session.execute(select(contents.c.status, contents.c.kind).where(contents.c.id == content_id)
                                 .with_for_update())).first()
    return None if row is None else dict(row._mapping)


async def has_outputs(session: AsyncSession, item_id: uuid.UUID) -> bool:
    return (await session.execute(select(outputs.c.id).where(outputs.c.item_id == item_id).limit(1))).first() \
        is not None


async def unfinished(session: AsyncSession, settled_before: Any) -> list[dict[str, Any]]:
    """Contents still processing (created before `settled_before`), with what deciding their job needs: kind,
    object, text, transcript, and the user whose transcription is pending."""
    pending_user = (
        select(user_items.c.user_id)
        .where(user_items.c.content_id == contents.c.id,
               user_items.c.transcription_status == Transcription.PENDING.value)
        .order_by(user_items.c.created_at).limit(1).scalar_subquery()
    )
    rows = (await session.execute(
        select(contents.c.id, contents.c.kind, contents.c.object_path, contents.c.text, contents.c.transcript,
               pending_user.label("pending_user"))
        .where(contents.c.status == Status.PROCESSING.value, contents.c.created_at < settled_before)
        .order_by(contents.c.created_at).limit(500)
    )).all()
    return [dict(r._mapping) for r in rows]


async def untransformed(session: AsyncSession, settled_before: Any, since: Any) -> list[uuid.UUID]:
    """Items saved between `since` and `settled_before` that asked for transforms, are ready with text, and whose
    transform never ran: its job was lost (Redis lost its data after the item became ready)."""
    rows = await session.execute(
        select(user_items.c.id).join(contents, contents.c.id == user_items.c.content_id)
        .where(user_items.c.auto_transform, user_items.c.transformed_at.is_(None), user_items.c.created_at >= since,
               user_items.c.created_at < settled_before, contents.c.status == Status.READY.value,
               func.octet_length(func.coalesce(contents.c.transcript, contents.c.text)) > 0)
        .order_by(user_items.c.created_at).limit(500))
    return [r[0] for r in rows]


async def mark_transformed(session: AsyncSession, item_id: uuid.UUID) -> None:
    """The item's transform ran (whatever it produced): the reconciler leaves it alone."""
    await session.execute(update(user_items).where(user_items.c.id == item_id).values(transformed_at=func.now()))


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



async def pdfs_without_pages(session: AsyncSession, limit: int) -> list[dict[str, Any]]:
    """Ready PDFs with a stored file and chunks whose pages are not known yet (stored before locations kept them);
    their id, object path and text."""
    rows = (await session.execute(text("""
        SELECT ct.id, ct.object_path, ct.text FROM contents ct
         WHERE ct.kind = 'pdf' AND ct.object_path IS NOT NULL AND ct.status = 'ready'
           AND NOT coalesce(ct.outline ? 'pages_unknown', false)
           AND jsonb_array_length(coalesce(ct.outline -> 'pages', '[]'::jsonb)) = 0
           AND EXISTS (SELECT 1 FROM chunks c WHERE c.content_id = ct.id)
         ORDER BY ct.created_at LIMIT :n"""), {"n": limit})).all()
    return [dict(r._mapping) for r in rows]


async def chunk_places(session: AsyncSession, content_id: uuid.UUID) -> list[tuple[uuid.UUID, int | None, int | None]]:
    """Each chunk of a content with its characters (chunk id, char_start, char_end)."""
    rows = await session.execute(select(chunks.c.id, chunk_locations.c.char_start, chunk_locations.c.char_end)
                                 .join(chunk_locations, chunk_locations.c.chunk_id == chunks.c.id)
                                 .where(chunks.c.content_id == content_id))
    return [(r.id, r.char_start, r.char_end) for r in rows]


async def set_pages(session: AsyncSession, content_id: uuid.UUID, outline: dict[str, Any],
                    pages: list[tuple[uuid.UUID, int | None, int | None]]) -> None:
    """A content's outline and its chunks' pages (chunk id, page, page_end)."""
    await session.execute(update(contents).where(contents.c.id == content_id).values(outline=outline))
    if pages:
        await session.execute(text("""
            UPDATE chunk_locations l SET page = u.p, page_end = u.e
              FROM unnest(CAST(:ids AS uuid[]), CAST(:p AS int[]), CAST(:e AS int[])) AS u(id, p, e)
             WHERE l.chunk_id = u.id"""), {"ids": [i for i, _, _ in pages], "p": [p for _, p, _ in pages],
                                           "e": [e for _, _, e in pages]})
