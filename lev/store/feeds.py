"""Feeds: the user's followed feeds (with the validators of their last fetch and their health) and every entry they
brought, keyed per user by guid and by canonical URL so nothing is ingested twice. An entry is recorded `pending`
in the same transaction as the fetch that found it: the database is the record of promised work."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    LargeBinary,
    and_,
    any_,
    bindparam,
    delete,
    exists,
    func,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.models import feed_entries, feeds, folders, item_folders
from lev.store.scope import Scope

# PostgreSQL's protocol carries at most 65,535 parameters a statement: an entry row binds 11, a key lookup 1
ROWS_PER_INSERT = 250
KEYS_PER_QUERY = 2000


def _row(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


def _pending() -> Any:
    """How many of the feed's entries wait for their item (the pending index: at most a check's worth)."""
    return (select(func.count()).select_from(feed_entries)
            .where(feed_entries.c.feed_id == feeds.c.id, feed_entries.c.status == "pending")
            .correlate(feeds).scalar_subquery().label("entries_pending"))


def _shown() -> tuple[Any, ...]:
    """A feed's columns and its progress (`entries_pending`), as its owner's reads show them."""
    return (*feeds.c, _pending())


def _in_scope(scope: Scope) -> ColumnElement[bool]:
    conds: list[ColumnElement[bool]] = [feeds.c.user_id == scope.user_id]
    if scope.folder_ids is not None:
        conds.append(feeds.c.folder_id.in_(scope.folder_ids) if scope.folder_ids else feeds.c.id.is_(None))
    return and_(*conds)


async def lock_user(session: AsyncSession, user_id: uuid.UUID) -> None:
    """Serialise the user's follows until the transaction ends (the per-user cap holds under concurrent follows)."""
    key = int.from_bytes(hashlib.sha256(b"lev-feeds:" + user_id.bytes).digest()[:8], "big", signed=True)
    await session.execute(select(func.pg_advisory_xact_lock(key)))


async def count_for_user(session: AsyncSession, user_id: uuid.UUID) -> int:
    return int((await session.execute(
        select(func.count()).select_from(feeds).where(feeds.c.user_id == user_id))).scalar_one())


async def by_url(session: AsyncSession, user_id: uuid.UUID, urls: list[str]) -> dict[str, Any] | None:
    """The user's feed followed at one of these URLs."""
    row = (await session.execute(select(*_shown()).where(feeds.c.user_id == user_id, feeds.c.url.in_(urls))
                                 .limit(1))).first()
    return _row(row) if row else None


async def create(session: AsyncSession, **values: Any) -> dict[str, Any] | None:
    """A new feed; None when the user follows this URL already (a concurrent follow won)."""
    row = (await session.execute(
        pg_insert(feeds).values(id=uuid.uuid4(), paused=False, failures=0, entries_ingested=0, **values)
        .on_conflict_do_nothing().returning(*feeds.c))).first()
    return _row(row) if row else None


async def shown(session: AsyncSession, feed_id: uuid.UUID) -> dict[str, Any]:
    """The feed with its progress, as its reads show it."""
    return _row((await session.execute(select(*_shown()).where(feeds.c.id == feed_id))).one())


async def list_visible(session: AsyncSession, scope: Scope, folder_id: uuid.UUID | None = None) -> list[dict[str, Any]]:
    q = select(*_shown()).where(_in_scope(scope))
    if folder_id is not None:
        q = q.where(feeds.c.folder_id == folder_id)
    rows = await session.execute(q.order_by(func.lower(func.coalesce(feeds.c.title, feeds.c.feed_title, feeds.c.url)),
                                            feeds.c.id))
    return [_row(r) for r in rows]


async def get_visible(session: AsyncSession, scope: Scope, feed_id: uuid.UUID, *,
                      lock: bool = False) -> dict[str, Any] | None:
    q = select(*_shown()).where(feeds.c.id == feed_id, _in_scope(scope))
    if lock:
        q = q.with_for_update(of=feeds)
    row = (await session.execute(q)).first()
    return _row(row) if row else None


async def update_feed(session: AsyncSession, feed_id: uuid.UUID, **values: Any) -> dict[str, Any]:
    return _row((await session.execute(update(feeds).where(feeds.c.id == feed_id).values(**values)
                                       .returning(*_shown()))).one())


async def delete_feed(session: AsyncSession, feed_id: uuid.UUID) -> None:
    await session.execute(delete(feeds).where(feeds.c.id == feed_id))


async def lock(session: AsyncSession, feed_id: uuid.UUID) -> bool:
    """Lock the feed's row for a change to it or its entries, before them (unfollowing locks the feed, then its
    entries go with it: the same order, so the two never deadlock); False once it is unfollowed."""
    q = select(feeds.c.id).where(feeds.c.id == feed_id).with_for_update(key_share=True)
    return (await session.execute(q)).first() is not None


async def row(session: AsyncSession, feed_id: uuid.UUID) -> dict[str, Any] | None:
    """The feed as its poll sees it, or None once it is unfollowed."""
    found = (await session.execute(select(feeds).where(feeds.c.id == feed_id))).first()
    return _row(found) if found else None


# ------------------------------------------------------------------------------------------------ entries


async def seen(session: AsyncSession, user_id: uuid.UUID, guid_keys: list[bytes],
               url_keys: list[bytes]) -> tuple[set[bytes], set[bytes]]:
    """Which of these guids and canonical URLs the user's feeds recorded already."""
    guids: set[bytes] = set()
    urls: set[bytes] = set()
    for column, keys in ((feed_entries.c.guid_key, guid_keys), (feed_entries.c.url_key, url_keys)):
        for start in range(0, len(keys), KEYS_PER_QUERY):  # one array parameter a statement, a slice at a time
            part = bindparam("keys", keys[start:start + KEYS_PER_QUERY], type_=ARRAY(LargeBinary))
            rows = (await session.execute(
                select(feed_entries.c.guid_key, feed_entries.c.url_key)
                .where(feed_entries.c.user_id == user_id, column == any_(part)))).all()
            guids.update(r.guid_key for r in rows)
            urls.update(r.url_key for r in rows if r.url_key is not None)
    return guids, urls


async def record_entries(session: AsyncSession, user_id: uuid.UUID, feed_id: uuid.UUID,
                         entries: list[dict[str, Any]]) -> None:
    """Record entries (each with guid_key, url_key, url, title, published_at, status, content); an entry the
    user's feeds have already (same guid or canonical URL) is left out. One statement, compiled once, per
    ROWS_PER_INSERT rows (the event loop gets a turn between them); the feed counts those recorded
    (`entries_found`)."""
    statement = pg_insert(feed_entries).on_conflict_do_nothing().returning(feed_entries.c.id)
    found = 0
    for start in range(0, len(entries), ROWS_PER_INSERT):
        found += len((await session.execute(statement, [
            {"id": uuid.uuid4(), "user_id": user_id, "feed_id": feed_id, **e}
            for e in entries[start:start + ROWS_PER_INSERT]])).all())
    if found:
        await session.execute(update(feeds).where(feeds.c.id == feed_id)
                              .values(entries_found=feeds.c.entries_found + found))


async def pending(session: AsyncSession, feed_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    """The feed's pending entries, oldest first (so the newest item is also the newest in the library)."""
    rows = await session.execute(
        select(feed_entries).where(feed_entries.c.feed_id == feed_id, feed_entries.c.status == "pending")
        .order_by(feed_entries.c.published_at.asc().nulls_first(), feed_entries.c.created_at, feed_entries.c.id)
        .limit(limit))
    return [_row(r) for r in rows]


async def still_pending(session: AsyncSession, entry_id: uuid.UUID) -> bool:
    """Whether the entry still waits for its item (False once its feed is unfollowed: the entries go with it)."""
    q = select(feed_entries.c.id).where(feed_entries.c.id == entry_id, feed_entries.c.status == "pending")
    return (await session.execute(q)).first() is not None


async def finish_entry(session: AsyncSession, entry: dict[str, Any], *, status: str, item_id: uuid.UUID | None,
                       error: str | None, brought: bool, folder_id: uuid.UUID | None) -> None:
    """An entry done (or failed): its item filed into the feed's folder, counted when the feed brought it."""
    if item_id is not None and folder_id is not None:
        live = (await session.execute(select(folders.c.id).where(folders.c.id == folder_id)
                                      .with_for_update(read=True, key_share=True))).first()
        if live is not None:
            await session.execute(pg_insert(item_folders).values(item_id=item_id, folder_id=folder_id)
                                  .on_conflict_do_nothing())
    if not await lock(session, entry["feed_id"]):
        return
    done = (await session.execute(
        update(feed_entries).where(feed_entries.c.id == entry["id"], feed_entries.c.status == "pending")
        .values(status=status, item_id=item_id, error=error[:1000] if error else None, content=None)
        .returning(feed_entries.c.id))).first()
    if done is not None and brought:
        await session.execute(update(feeds).where(feeds.c.id == entry["feed_id"])
                              .values(entries_ingested=feeds.c.entries_ingested + 1))


# ------------------------------------------------------------------------------------------------ the schedule


_CLAIM_DUE = text("""
WITH due AS (
    SELECT id FROM feeds WHERE NOT paused AND next_poll_at <= now()
    ORDER BY next_poll_at LIMIT :limit FOR UPDATE SKIP LOCKED
)
UPDATE feeds f SET next_poll_at = now() + make_interval(secs => :lease)
FROM due WHERE f.id = due.id
RETURNING f.*
""")


async def claim_due(session: AsyncSession, limit: int, lease_sec: float) -> list[dict[str, Any]]:
    """Take up to `limit` due feeds for a check, in one statement: each is not due again for `lease_sec` (a checker
    that dies leaves them to the next), and feeds another checker is taking are skipped."""
    return [_row(r) for r in await session.execute(_CLAIM_DUE, {"limit": limit, "lease": lease_sec})]


_UNCHANGED = text("""
UPDATE feeds f
SET last_checked_at = now(), last_success_at = now(), failures = 0, last_error = NULL, next_poll_at = u.next_at,
    etag = coalesce(u.etag, f.etag), last_modified = coalesce(u.modified, f.last_modified)
FROM unnest(CAST(:ids AS uuid[]), CAST(:next_at AS timestamptz[]), CAST(:etags AS text[]),
            CAST(:modified AS text[])) AS u(id, next_at, etag, modified)
WHERE f.id = u.id
""")


async def checked_unchanged(session: AsyncSession, checks: list[tuple[uuid.UUID, datetime, str | None, str | None]]
                            ) -> None:
    """Record a batch of successful checks that found nothing new (304, or the same body), in one statement: each
    (feed id, its next check, the ETag and Last-Modified answered, if any)."""
    if checks:
        ids, next_at, etags, modified = (list(column) for column in zip(*checks, strict=True))
        await session.execute(_UNCHANGED, {"ids": ids, "next_at": next_at, "etags": etags, "modified": modified})


async def with_pending(session: AsyncSession, limit: int = 1000) -> list[uuid.UUID]:
    """Feeds (not paused) holding pending entries: their poll's job was lost, or is still to run."""
    has_pending = exists().where(feed_entries.c.feed_id == feeds.c.id, feed_entries.c.status == "pending")
    rows = await session.execute(select(feeds.c.id).where(feeds.c.paused.is_(False), has_pending).limit(limit))
    return list(rows.scalars())


async def checked(session: AsyncSession, feed_id: uuid.UUID, *, error: str | None, next_poll_at: datetime,
                  **values: Any) -> int:
    """A check's outcome: success (validators, titles, failures back to 0) or failure (`error`, one more failure
    in a row). Returns the failures in a row now."""
    if error is None:
        values.update(failures=0, last_error=None, last_success_at=func.now())
    else:
        values.update(failures=feeds.c.failures + 1, last_error=error[:1000])
    return int((await session.execute(
        update(feeds).where(feeds.c.id == feed_id)
        .values(last_checked_at=func.now(), next_poll_at=next_poll_at, **values)
        .returning(feeds.c.failures))).scalar_one())


async def release_claim(session: AsyncSession, feed_id: uuid.UUID, leased_until: datetime) -> bool:
    """Make a feed `claim_due` took due again, unless a check was recorded meanwhile (its next check is no longer
    the lease's end). Returns whether it was released."""
    done = await session.execute(update(feeds).where(feeds.c.id == feed_id, feeds.c.next_poll_at == leased_until)
                                 .values(next_poll_at=func.now()))
    return bool(done.rowcount)  # type: ignore[attr-defined]
