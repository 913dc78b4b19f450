"""Imports: the import record and its entries (the database's record of acknowledged import work), the folders an
import files into, the lookups that keep a re-run from adding an item twice, and progress counts."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import and_, func, insert, literal, null, select, union_all, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.import_models import import_entries, imports
from lev.store.models import contents, folders, item_folders, object_deletions, outputs, user_items


async def ensure_folders(session: AsyncSession, user_id: uuid.UUID,
                         names: list[str]) -> tuple[dict[str, uuid.UUID], int]:
    """The user's folder for each name (compared case-insensitively), created when missing, keyed by the
    lower-cased name, and how many were created. Folders that existed are reused, so a re-run files into the
    same folders."""
    if not names:
        return {}, 0
    fresh = [{"id": uuid.uuid4(), "user_id": user_id, "name": n} for n in names]
    await session.execute(pg_insert(folders).values(fresh).on_conflict_do_nothing())
    rows = await session.execute(
        select(folders.c.id, func.lower(folders.c.name).label("key"))
        .where(folders.c.user_id == user_id, func.lower(folders.c.name).in_([n.lower() for n in names]))
        .with_for_update(read=True, key_share=True)
    )
    found = {r.key: r.id for r in rows}
    fresh_ids = {f["id"] for f in fresh}
    return found, sum(1 for f in found.values() if f in fresh_ids)


async def create_import(session: AsyncSession, *, user_id: uuid.UUID, token_id: uuid.UUID | None, fmt: str,
                 filename: str | None, size_bytes: int, folder_ids: list[uuid.UUID], folders_created: int,
                 skipped: list[dict[str, Any]], entries: list[dict[str, Any]], skipped_total: int | None = None,
                 object_path: str | None = None) -> uuid.UUID:
    """Record an import and all its entries (each `pending`) in the caller's transaction; a ZIP's import keeps its
    archive at `object_path` while it runs."""
    import_id = uuid.uuid4()
    await session.execute(insert(imports).values(
        id=import_id, user_id=user_id, token_id=token_id, format=fmt, filename=filename, size_bytes=size_bytes,
        status="running" if entries else "done", folder_ids=folder_ids, folders_created=folders_created,
        skipped=skipped, slice=0, finished_at=None if entries else func.now(),
        skipped_total=len(skipped) if skipped_total is None else skipped_total,
        object_path=object_path if entries else None))
    await _copy_entries(session, import_id, entries)
    return import_id


_ENTRY_COLUMNS = ("import_id", "ord", "line", "url", "text", "kind", "title", "metadata", "folder_ids", "in_kb",
                  "archived", "outputs", "status", "existing", "path", "member", "mime")


async def _copy_entries(session: AsyncSession, import_id: uuid.UUID, entries: list[dict[str, Any]]) -> None:
    """The entries by COPY on the session's own connection (same transaction): a row costs microseconds of the
    event loop, where a multi-row INSERT's parameters cost tens (100k links held the loop for seconds)."""
    if not entries:
        return
    raw = await (await session.connection()).get_raw_connection()
    conn = raw.driver_connection
    assert conn is not None
    columns = ", ".join(_ENTRY_COLUMNS)
    async with conn.cursor() as cur, cur.copy(f"COPY import_entries ({columns}) FROM STDIN") as copy:
        copy.set_types(["uuid", "int4", "int4", "text", "text", "text", "text", "jsonb", "uuid[]", "bool", "bool",
                        "jsonb", "text", "bool", "text", "text", "text"])
        for ord_, e in enumerate(entries):
            await copy.write_row((import_id, ord_, e["line"], e["url"], e["text"], e["kind"], e["title"],
                                  Jsonb(e["metadata"]), e["folder_ids"], e["in_kb"], e["archived"], Jsonb(e["outputs"]),
                                  e["status"], e["existing"], e.get("path"), e.get("member"), e.get("mime")))
            if ord_ % 256 == 255:
                await asyncio.sleep(0)  # write_row rarely waits: let other requests run between rows


def _shape(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


async def get_import(session: AsyncSession, user_id: uuid.UUID, import_id: uuid.UUID) -> dict[str, Any] | None:
    """The user's import with its entry counts, or None (another user's import is None too)."""
    counts = (select(
        func.count().label("total"),
        func.count().filter(import_entries.c.status == "done").label("done"),
        func.count().filter(import_entries.c.status == "failed").label("failed"),
        func.count().filter(import_entries.c.existing).label("already_present"),
        func.count().filter(import_entries.c.status == "done", import_entries.c.change == "updated").label("updated"),
    ).where(import_entries.c.import_id == imports.c.id).lateral())
    row = (await session.execute(
        select(imports, counts).select_from(imports.join(counts, literal(True)))
        .where(imports.c.id == import_id, imports.c.user_id == user_id)
    )).first()
    return _shape(row) if row else None


async def import_row(session: AsyncSession, import_id: uuid.UUID) -> dict[str, Any] | None:
    """The import record alone (the job's view), or None once it is deleted."""
    found = (await session.execute(select(imports).where(imports.c.id == import_id))).first()
    return _shape(found) if found else None


async def list_recent(session: AsyncSession, user_id: uuid.UUID, limit: int) -> list[uuid.UUID]:
    return list((await session.execute(
        select(imports.c.id).where(imports.c.user_id == user_id)
        .order_by(imports.c.created_at.desc(), imports.c.id).limit(limit))).scalars())


async def failures(session: AsyncSession, import_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    rows = await session.execute(
        select(import_entries.c.line, import_entries.c.url, import_entries.c.title, import_entries.c.error,
               import_entries.c.item_id, import_entries.c.path)
        .where(import_entries.c.import_id == import_id, import_entries.c.status == "failed")
        .order_by(import_entries.c.ord).limit(limit))
    return [_shape(r) for r in rows]


async def lost_highlights(session: AsyncSession, import_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    """The import's updated files whose items lost highlights (their words gone from the new text), in file order."""
    rows = await session.execute(
        select(import_entries.c.path, import_entries.c.item_id, import_entries.c.lost)
        .where(import_entries.c.import_id == import_id, import_entries.c.lost.isnot(None))
        .order_by(import_entries.c.ord).limit(limit))
    return [_shape(r) for r in rows]


async def live_folders(session: AsyncSession, user_id: uuid.UUID, ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    """The import's folders that still exist, by name, each with its item count."""
    if not ids:
        return []
    count = (select(func.count()).select_from(item_folders)
             .where(item_folders.c.folder_id == folders.c.id).scalar_subquery())
    rows = await session.execute(
        select(folders.c.id, folders.c.name, count.label("item_count"))
        .where(folders.c.user_id == user_id, folders.c.id.in_(ids)).order_by(func.lower(folders.c.name)))
    return [{"id": str(r.id), "name": r.name, "item_count": int(r.item_count)} for r in rows]


async def pending_page(session: AsyncSession, import_id: uuid.UUID, after: int, limit: int) -> list[dict[str, Any]]:
    rows = await session.execute(
        select(import_entries).where(import_entries.c.import_id == import_id, import_entries.c.ord > after,
                                     import_entries.c.status == "pending")
        .order_by(import_entries.c.ord).limit(limit))
    return [_shape(r) for r in rows]


async def existing_by_url(session: AsyncSession, user_id: uuid.UUID, urls: list[str],
                          canonicals: list[str]) -> dict[str, Any] | None:
    """The user's oldest item for any of these URLs (as given, or by its content's canonical URL)."""
    by_url = select(user_items.c.id, user_items.c.created_at).where(
        user_items.c.user_id == user_id, user_items.c.url.in_(urls))
    by_canonical = (select(user_items.c.id, user_items.c.created_at)
                    .join(contents, contents.c.id == user_items.c.content_id)
                    .where(user_items.c.user_id == user_id, contents.c.canonical_url.in_(canonicals)))
    both = union_all(by_url, by_canonical).subquery()
    found = (await session.execute(select(both).order_by(both.c.created_at, both.c.id).limit(1))).first()
    return _shape(found) if found else None


async def existing_by_text(session: AsyncSession, user_id: uuid.UUID, text: str) -> dict[str, Any] | None:
    """The user's oldest text item (no URL) holding exactly `text`."""
    found = (await session.execute(
        select(user_items.c.id, user_items.c.created_at).join(contents, contents.c.id == user_items.c.content_id)
        .where(user_items.c.user_id == user_id, user_items.c.url.is_(None), contents.c.url.is_(None),
               func.md5(contents.c.text) == func.md5(text), contents.c.text == text)
        .order_by(user_items.c.created_at, user_items.c.id).limit(1))).first()
    return _shape(found) if found else None


async def finish_entry(session: AsyncSession, entry: dict[str, Any], item_id: uuid.UUID, *, ours: bool,
                       existing: bool, error: str | None = None, change: str | None = None,
                       lost: list[dict[str, Any]] | None = None) -> bool:
    """File the entry's item into the import's folders that still exist and mark the entry done (or failed with
    `error`), in the caller's transaction. An item this import created (`ours`) also gets the entry's metadata,
    archived flag and outputs; an item the user already had keeps its own. Whether the item still exists (it is
    then locked against deletion until the transaction ends)."""
    locked = (await session.execute(
        select(user_items.c.id).where(user_items.c.id == item_id).with_for_update(read=True, key_share=True)
    )).first()
    if locked is not None:
        if entry["folder_ids"]:
            live = list((await session.execute(
                select(folders.c.id).where(folders.c.id.in_(entry["folder_ids"]))
                .order_by(folders.c.id).with_for_update(read=True, key_share=True))).scalars())
            if live:
                await session.execute(pg_insert(item_folders).values(
                    [{"item_id": item_id, "folder_id": f} for f in live]).on_conflict_do_nothing())
        if ours:
            await session.execute(update(user_items).where(user_items.c.id == item_id).values(
                metadata=user_items.c.metadata.op("||")(literal(entry["metadata"] or {}, JSONB)),
                archived=entry["archived"] or user_items.c.archived))
            if entry["outputs"] and (await session.execute(
                    select(func.count()).where(outputs.c.item_id == item_id))).scalar_one() == 0:
                await session.execute(insert(outputs), [
                    {"id": uuid.uuid4(), "item_id": item_id, "kind": o["kind"], "content": o["content"],
                     "generator": o["generator"]} for o in entry["outputs"]])
    await session.execute(
        update(import_entries)
        .where(import_entries.c.import_id == entry["import_id"], import_entries.c.ord == entry["ord"])
        .values(status="failed" if error else "done", error=error, existing=existing,
                item_id=item_id if locked is not None else None, change=change, lost=lost if lost else null()))
    return locked is not None


async def fail_entry(session: AsyncSession, entry: dict[str, Any], error: str) -> None:
    """Mark an entry failed without an item (it could not even be stored)."""
    await session.execute(
        update(import_entries)
        .where(import_entries.c.import_id == entry["import_id"], import_entries.c.ord == entry["ord"])
        .values(status="failed", error=error[:1000]))


async def complete_if_done(session: AsyncSession, import_id: uuid.UUID) -> tuple[bool, bool]:
    """Mark the import done when no entry is pending (its archive, if any, queued for deletion): whether it is (now
    or already) done, and whether this call finished it (import.finished is told once)."""
    pending = (await session.execute(
        select(import_entries.c.ord).where(import_entries.c.import_id == import_id,
                                           import_entries.c.status == "pending").limit(1))).first()
    if pending is not None:
        return False, False
    archive = (await session.execute(select(imports.c.object_path).where(imports.c.id == import_id)
                                     .with_for_update())).scalar()
    now = (await session.execute(update(imports).where(imports.c.id == import_id, imports.c.status == "running")
                                 .values(status="done", finished_at=func.now(), object_path=None)
                                 .returning(imports.c.id))).first()
    if now is not None and archive:
        await session.execute(pg_insert(object_deletions).values(path=archive, attempts=0).on_conflict_do_nothing())
    return True, now is not None


async def next_slice(session: AsyncSession, import_id: uuid.UUID, current: int) -> int | None:
    """Hand the rest of the import to its next slice; None when another run already did."""
    return (await session.execute(
        update(imports).where(imports.c.id == import_id, imports.c.slice == current, imports.c.status == "running")
        .values(slice=imports.c.slice + 1).returning(imports.c.slice))).scalar_one_or_none()


async def running(session: AsyncSession, *, settled_before: datetime | None = None,
                  user_id: uuid.UUID | None = None) -> list[dict[str, Any]]:
    """Running imports (oldest first) with their current slice: those created before `settled_before`, or one
    user's."""
    conds = [imports.c.status == "running"]
    if settled_before is not None:
        conds.append(imports.c.created_at < settled_before)
    if user_id is not None:
        conds.append(imports.c.user_id == user_id)
    rows = await session.execute(select(imports.c.id, imports.c.slice, imports.c.user_id).where(and_(*conds))
                                 .order_by(imports.c.created_at).limit(500))
    return [_shape(r) for r in rows]


async def fail_pending(session: AsyncSession, import_id: uuid.UUID, reason: str) -> int:
    """Give up an import's pending entries with `reason` (a job that kept failing); the caller then marks it done."""
    res = await session.execute(
        update(import_entries).where(import_entries.c.import_id == import_id, import_entries.c.status == "pending")
        .values(status="failed", error=reason[:1000]))
    return int(res.rowcount)  # type: ignore[attr-defined]

