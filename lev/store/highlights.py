"""Highlights: passages of an item's text a user marked, with their notes. A highlight is visible to a caller when it
is the caller's own and its item is visible to the caller's scope (`store.items.visible`)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, exists, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.items import visible
from lev.store.locations import Outline
from lev.store.models import chunk_locations, chunks, contents, highlights, item_folders, user_items
from lev.store.scope import Scope

_COLS = (highlights.c.id, highlights.c.item_id, highlights.c.text, highlights.c.note, highlights.c.char_start,
         highlights.c.char_end, highlights.c.created_at, highlights.c.updated_at)


def shape(row: Any) -> dict[str, Any]:
    """A highlight as every surface shows it."""
    m = row._mapping
    return {"id": str(m["id"]), "item_id": str(m["item_id"]), "text": m["text"], "note": m["note"],
            "char_start": m["char_start"], "char_end": m["char_end"], "created_at": m["created_at"].isoformat(),
            "updated_at": m["updated_at"].isoformat()}


def _visible(scope: Scope) -> ColumnElement[bool]:
    """The caller's own highlight on an item the caller can see."""
    return and_(highlights.c.user_id == scope.user_id,
                exists().where(user_items.c.id == highlights.c.item_id, visible(scope)))


async def item_body(session: AsyncSession, scope: Scope, item_id: uuid.UUID, *,
                    lock: bool = False) -> dict[str, Any] | None:
    """A visible item's title, URL and text (its `text`, or a recording's `transcript`); None when it is not visible.
    With `lock`, the item cannot be deleted before the transaction ends."""
    q = (select(user_items.c.id, user_items.c.title, user_items.c.url, contents.c.text, contents.c.transcript)
         .join(contents, contents.c.id == user_items.c.content_id)
         .where(user_items.c.id == item_id, visible(scope)))
    if lock:
        q = q.with_for_update(read=True, key_share=True, of=user_items)
    row = (await session.execute(q)).first()
    if row is None:
        return None
    return {"title": row.title, "url": row.url, "text": row.text or row.transcript or ""}


async def create(session: AsyncSession, *, user_id: uuid.UUID, item_id: uuid.UUID, text: str, note: str | None,
                 char_start: int, char_end: int, embedding: list[float] | None) -> dict[str, Any]:
    row = (await session.execute(
        insert(highlights).values(id=uuid.uuid4(), user_id=user_id, item_id=item_id, text=text, note=note,
                                  char_start=char_start, char_end=char_end, embedding=embedding)
        .returning(*_COLS))).one()
    return shape(row)


async def of_item(session: AsyncSession, user_id: uuid.UUID, item_id: uuid.UUID) -> list[dict[str, Any]]:
    """The user's highlights of one item (visibility checked by the caller), in the order of the text."""
    rows = await session.execute(
        select(*_COLS).where(highlights.c.user_id == user_id, highlights.c.item_id == item_id)
        .order_by(highlights.c.char_start, highlights.c.created_at, highlights.c.id))
    return [shape(r) for r in rows]


async def of_items(session: AsyncSession, user_id: uuid.UUID,
                   item_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[dict[str, Any]]]:
    """The user's highlights of several items, by item, each in the order of the text (the export)."""
    found: dict[uuid.UUID, list[dict[str, Any]]] = {}
    if not item_ids:
        return found
    rows = await session.execute(
        select(*_COLS).where(highlights.c.user_id == user_id, highlights.c.item_id.in_(item_ids))
        .order_by(highlights.c.item_id, highlights.c.char_start, highlights.c.created_at, highlights.c.id))
    for r in rows:
        found.setdefault(r.item_id, []).append(shape(r))
    return found


async def get_visible(session: AsyncSession, scope: Scope, highlight_id: uuid.UUID) -> dict[str, Any] | None:
    row = (await session.execute(select(*_COLS).where(highlights.c.id == highlight_id, _visible(scope)))).first()
    return shape(row) if row else None


async def update_note(session: AsyncSession, scope: Scope, highlight_id: uuid.UUID, note: str | None,
                      embedding: list[float] | None) -> dict[str, Any] | None:
    row = (await session.execute(
        update(highlights).where(highlights.c.id == highlight_id, _visible(scope))
        .values(note=note, embedding=embedding, updated_at=func.now()).returning(*_COLS))).first()
    return shape(row) if row else None


async def delete_visible(session: AsyncSession, scope: Scope, highlight_id: uuid.UUID) -> dict[str, Any] | None:
    """Delete the caller's highlight; it as it was, or None when the caller cannot see it."""
    row = (await session.execute(
        delete(highlights).where(highlights.c.id == highlight_id, _visible(scope)).returning(*_COLS))).first()
    return shape(row) if row else None


async def list_recent(session: AsyncSession, scope: Scope, *, folder_id: uuid.UUID | None = None, page: int = 1,
                      per_page: int = 50) -> tuple[list[dict[str, Any]], int]:
    """A page of the caller's highlights on items it can see (in `folder_id`), newest first, each with its item's
    title, URL and kind; and the total."""
    conds: list[ColumnElement[bool]] = [highlights.c.user_id == scope.user_id, visible(scope)]
    if folder_id is not None:
        conds.append(exists().where(item_folders.c.item_id == user_items.c.id, item_folders.c.folder_id == folder_id))
    joined = highlights.join(user_items, user_items.c.id == highlights.c.item_id)
    where = and_(*conds)
    total = int((await session.execute(select(func.count()).select_from(joined).where(where))).scalar_one())
    rows = await session.execute(
        select(*_COLS, user_items.c.title.label("item_title"), user_items.c.url.label("item_url"),
               user_items.c.kind.label("item_kind"))
        .select_from(joined).where(where)
        .order_by(highlights.c.created_at.desc(), highlights.c.id.desc())
        .limit(per_page).offset((page - 1) * per_page))
    found = []
    for r in rows:
        h = shape(r)
        h["item"] = {"id": h["item_id"], "title": r.item_title, "url": r.item_url, "kind": r.item_kind}
        found.append(h)
    return found, total


async def all_of_item(session: AsyncSession, item_id: uuid.UUID) -> list[dict[str, Any]]:
    """Every user's highlights of one item, locked (the item's text is being replaced), with their user."""
    rows = await session.execute(select(*_COLS, highlights.c.user_id).where(highlights.c.item_id == item_id)
                                 .order_by(highlights.c.id).with_for_update())
    return [{**shape(r), "user_id": r.user_id} for r in rows]


async def items_with_highlights(session: AsyncSession, content_id: uuid.UUID) -> list[uuid.UUID]:
    """The items of a content that have highlights."""
    rows = await session.execute(select(user_items.c.id).where(
        user_items.c.content_id == content_id, exists().where(highlights.c.item_id == user_items.c.id))
        .order_by(user_items.c.id))
    return list(rows.scalars())


async def move(session: AsyncSession, highlight_id: uuid.UUID, *, char_start: int, char_end: int, text: str) -> None:
    await session.execute(update(highlights).where(highlights.c.id == uuid.UUID(str(highlight_id)))
                          .values(char_start=char_start, char_end=char_end, text=text))


async def delete_ids(session: AsyncSession, ids: list[str]) -> None:
    if ids:
        await session.execute(delete(highlights).where(highlights.c.id.in_([uuid.UUID(i) for i in ids])))


async def reading_guides(session: AsyncSession, content_id: uuid.UUID) -> tuple[Outline, list[tuple[int, float]]]:
    """What the reader view marks in a content's text: its outline (where a PDF's pages, a presentation's slides
    and a spreadsheet's sheets start; a document's headings) without its rows, and where a recording's passages
    start ((offset, second), from its chunks' locations)."""
    parts = [contents.c.outline[k] for k in ("headings", "pages", "slides", "sheets", "structured")]
    found = (await session.execute(select(*parts).where(contents.c.id == content_id))).first()
    outline = Outline.from_json(dict(zip(("headings", "pages", "slides", "sheets", "structured"), found or (),
                                         strict=False)))
    moments = await session.execute(
        select(chunk_locations.c.char_start, chunks.c.start_sec)
        .join(chunk_locations, chunk_locations.c.chunk_id == chunks.c.id)
        .where(chunks.c.content_id == content_id, chunks.c.start_sec.isnot(None),
               chunk_locations.c.char_start.isnot(None))
        .order_by(chunk_locations.c.char_start))
    return outline, [(int(a), float(sec)) for a, sec in moments]
