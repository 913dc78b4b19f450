"""Webhooks: the user's endpoints (with their signing secrets, kept only here), the outbox of events and their
deliveries (one per event and endpoint, written in the transaction that makes the event true), and the attempts
the deliveries list shows."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, func, insert, literal, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.items import tag_names_sql
from lev.store.models import (
    item_folders,
    user_items,
    webhook_attempts,
    webhook_deliveries,
    webhook_events,
    webhooks,
)

_PUBLIC = (webhooks.c.id, webhooks.c.url, webhooks.c.description, webhooks.c.events, webhooks.c.enabled,
           webhooks.c.disabled_reason, webhooks.c.failing_since, webhooks.c.created_at, webhooks.c.updated_at)


def _row(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


def _subscribed(event_type: str) -> Any:
    return and_(webhooks.c.enabled.is_(True), webhooks.c.events.any_() == event_type)


async def subscribers(session: AsyncSession, user_id: uuid.UUID, event_type: str) -> list[uuid.UUID]:
    """The user's enabled endpoints that take `event_type`."""
    return list((await session.execute(
        select(webhooks.c.id).where(webhooks.c.user_id == user_id, _subscribed(event_type)))).scalars())


async def items_with_subscribers(session: AsyncSession, event_type: str, *, item_ids: list[uuid.UUID] | None = None,
                                 content_id: uuid.UUID | None = None) -> list[dict[str, Any]]:
    """The given items (or a content's items) whose owner has an endpoint for `event_type`: what an item event
    tells (`webhook_ids` names the endpoints). Items of users without one cost this one query."""
    hooks = (select(func.array_agg(webhooks.c.id)).where(webhooks.c.user_id == user_items.c.user_id,
                                                          _subscribed(event_type)).scalar_subquery())
    folder_ids = (select(func.array_agg(item_folders.c.folder_id))
                  .where(item_folders.c.item_id == user_items.c.id).scalar_subquery())
    where = user_items.c.id.in_(item_ids) if item_ids is not None else user_items.c.content_id == content_id
    inner = (select(user_items.c.id, user_items.c.user_id, user_items.c.content_id, user_items.c.url,
                    user_items.c.title, user_items.c.kind, user_items.c.status, user_items.c.error,
                    user_items.c.read_at, user_items.c.progress, tag_names_sql().label("tags"),
                    folder_ids.label("folder_ids"), hooks.label("webhook_ids"))
             .where(where).order_by(user_items.c.id).subquery())
    rows = await session.execute(select(inner).where(inner.c.webhook_ids.isnot(None)))
    return [_row(r) for r in rows]


async def add_event(session: AsyncSession, *, event_id: str, user_id: uuid.UUID, event_type: str,
                    payload: dict[str, Any], webhook_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """Record an event and one pending delivery per endpoint, in the caller's transaction; the deliveries' ids."""
    await session.execute(insert(webhook_events).values(id=event_id, user_id=user_id, type=event_type,
                                                        payload=payload))
    return await add_deliveries(session, event_id, webhook_ids)


async def add_deliveries(session: AsyncSession, event_id: str, webhook_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in webhook_ids]
    if ids:
        await session.execute(insert(webhook_deliveries).values([
            {"id": d, "webhook_id": w, "event_id": event_id, "status": "pending", "attempts": 0,
             "next_attempt_at": func.clock_timestamp()}  # not the transaction's now(): later events are due later
            for d, w in zip(ids, webhook_ids, strict=True)]))
    return ids


# ------------------------------------------------------------------------------------------------ endpoints


async def count_for_user(session: AsyncSession, user_id: uuid.UUID) -> int:
    return int((await session.execute(
        select(func.count()).select_from(webhooks).where(webhooks.c.user_id == user_id))).scalar_one())


async def create(session: AsyncSession, *, user_id: uuid.UUID, url: str, events: list[str],
                 description: str | None, secret: str) -> dict[str, Any]:
    row = (await session.execute(insert(webhooks).values(
        id=uuid.uuid4(), user_id=user_id, url=url, events=events, description=description, secret=secret,
        enabled=True).returning(*_PUBLIC))).one()
    return _row(row)


async def list_for_user(session: AsyncSession, user_id: uuid.UUID) -> list[dict[str, Any]]:
    rows = await session.execute(select(*_PUBLIC).where(webhooks.c.user_id == user_id)
                                 .order_by(webhooks.c.created_at, webhooks.c.id))
    return [_row(r) for r in rows]


async def get(session: AsyncSession, user_id: uuid.UUID, webhook_id: uuid.UUID, *,
              lock: bool = False) -> dict[str, Any] | None:
    q = select(*_PUBLIC).where(webhooks.c.id == webhook_id, webhooks.c.user_id == user_id)
    if lock:
        q = q.with_for_update()
    row = (await session.execute(q)).first()
    return _row(row) if row else None


async def update_endpoint(session: AsyncSession, user_id: uuid.UUID, webhook_id: uuid.UUID,
                          values: dict[str, Any]) -> dict[str, Any] | None:
    row = (await session.execute(
        update(webhooks).where(webhooks.c.id == webhook_id, webhooks.c.user_id == user_id)
        .values(**values, updated_at=func.now()).returning(*_PUBLIC))).first()
    return _row(row) if row else None


async def delete_endpoint(session: AsyncSession, user_id: uuid.UUID, webhook_id: uuid.UUID) -> bool:
    res = await session.execute(delete(webhooks).where(webhooks.c.id == webhook_id, webhooks.c.user_id == user_id))
    return bool(res.rowcount)  # type: ignore[attr-defined]


async def rotate_secret(session: AsyncSession, user_id: uuid.UUID, webhook_id: uuid.UUID, secret: str,
                        keep_old_until: datetime) -> bool:
    """A new secret; the old one still signs beside it until `keep_old_until` (receivers switch meanwhile)."""
    res = await session.execute(
        update(webhooks).where(webhooks.c.id == webhook_id, webhooks.c.user_id == user_id)
        .values(previous_secret=webhooks.c.secret, previous_secret_until=keep_old_until, secret=secret,
                updated_at=func.now()))
    return bool(res.rowcount)  # type: ignore[attr-defined]


async def attempts(session: AsyncSession, webhook_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    """The endpoint's most recent attempts, newest first."""
    rows = await session.execute(
        select(webhook_attempts).where(webhook_attempts.c.webhook_id == webhook_id)
        .order_by(webhook_attempts.c.created_at.desc(), webhook_attempts.c.attempt.desc()).limit(limit))
    return [_row(r) for r in rows]


async def attempt_event(session: AsyncSession, webhook_id: uuid.UUID, attempt_id: uuid.UUID) -> str | None:
    """The event of one of the endpoint's attempts (what a re-send sends again)."""
    return (await session.execute(
        select(webhook_attempts.c.event_id).where(webhook_attempts.c.id == attempt_id,
                                                  webhook_attempts.c.webhook_id == webhook_id))).scalar_one_or_none()


async def event_exists(session: AsyncSession, event_id: str) -> bool:
    return (await session.execute(select(webhook_events.c.id).where(webhook_events.c.id == event_id))).first() \
        is not None


# ------------------------------------------------------------------------------------------------ delivery


_CLAIM = text("""
WITH RECURSIVE waiting(webhook_id) AS (
    (SELECT webhook_id FROM webhook_deliveries WHERE status = 'pending' ORDER BY webhook_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.webhook_id FROM webhook_deliveries d
            WHERE d.status = 'pending' AND d.webhook_id > waiting.webhook_id ORDER BY d.webhook_id LIMIT 1)
    FROM waiting WHERE waiting.webhook_id IS NOT NULL
), room AS (
    SELECT w.id, CASE WHEN w.failing_since IS NULL THEN :healthy ELSE :failing END - coalesce(h.n, 0) AS n
    FROM waiting JOIN webhooks w ON w.id = waiting.webhook_id AND w.enabled
    LEFT JOIN unnest(CAST(:held AS uuid[]), CAST(:held_n AS int[])) AS h(webhook_id, n) ON h.webhook_id = w.id
    WHERE w.id <> ALL(CAST(:full AS uuid[]))
), picked AS (
    SELECT due.id FROM room CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
        WHERE d.webhook_id = room.id AND d.status = 'pending' AND d.next_attempt_at <= now()
          AND (d.locked_until IS NULL OR d.locked_until < now())
        ORDER BY d.next_attempt_at LIMIT greatest(room.n, 0)
        FOR UPDATE SKIP LOCKED
    ) due
    ORDER BY due.next_attempt_at
    LIMIT :limit
)
UPDATE webhook_deliveries d SET locked_until = now() + make_interval(secs => :lease)
FROM picked, webhooks w, webhook_events e
WHERE d.id = picked.id AND w.id = d.webhook_id AND e.id = d.event_id
RETURNING d.id, d.webhook_id, d.event_id, d.attempts, d.next_attempt_at AS due, w.url, w.secret, w.previous_secret,
          coalesce(w.previous_secret_until > now(), false) AS old_valid, w.failing_since IS NOT NULL AS failing,
          e.type, e.payload
""")


async def claim_due(session: AsyncSession, *, limit: int, held: dict[uuid.UUID, int], full: list[uuid.UUID],
                    healthy_cap: int, failing_cap: int, lease_sec: float) -> list[dict[str, Any]]:
    """Take up to `limit` due pending deliveries of enabled endpoints for one attempt each (no one else takes them
    for `lease_sec`), at most `healthy_cap` per endpoint at a time (`failing_cap` for an endpoint whose last
    attempt failed) counting the `held` attempts this process runs already; endpoints in `full` are skipped.
    Endpoint by endpoint: each endpoint holding pending deliveries (found by a skip scan of the index by endpoint)
    gives its oldest due ones up to its room, so one endpoint's backlog never hides another's deliveries; rows
    another sender is taking are skipped, never waited for. Oldest first across endpoints. Each with its
    endpoint's URL and secrets and its event; one statement."""
    rows = await session.execute(_CLAIM, {
        "healthy": healthy_cap, "failing": failing_cap, "full": full, "held": list(held),
        "held_n": list(held.values()), "limit": limit, "lease": lease_sec})
    return [_row(r) for r in rows]


_ATTEMPTS = text("""
INSERT INTO webhook_attempts (id, delivery_id, webhook_id, event_id, event_type, attempt, status, status_code,
                              error, response, duration_ms, next_attempt_at)
SELECT u.id, d.id, d.webhook_id, d.event_id, e.type, u.attempt, u.status, u.code, u.error, u.response, u.duration,
       u.next_at
FROM unnest(CAST(:ids AS uuid[]), CAST(:deliveries AS uuid[]), CAST(:attempts AS int[]), CAST(:statuses AS text[]),
            CAST(:codes AS int[]), CAST(:errors AS text[]), CAST(:responses AS text[]), CAST(:durations AS int[]),
            CAST(:next_at AS timestamptz[]))
     AS u(id, delivery, attempt, status, code, error, response, duration, next_at)
JOIN webhook_deliveries d ON d.id = u.delivery
JOIN webhook_events e ON e.id = d.event_id
""")

_RECORD = text("""
UPDATE webhook_deliveries d
SET attempts = u.attempts, locked_until = NULL, next_attempt_at = coalesce(u.next_at, d.next_attempt_at),
    status = u.status, finished_at = CASE WHEN u.status = 'pending' THEN NULL ELSE now() END
FROM unnest(CAST(:ids AS uuid[]), CAST(:attempts AS int[]), CAST(:statuses AS text[]),
            CAST(:next_at AS timestamptz[])) AS u(id, attempts, status, next_at)
WHERE d.id = u.id
""")

_HEALTH = text("""
UPDATE webhooks w
SET failing_since = CASE WHEN u.ok THEN NULL ELSE coalesce(w.failing_since, now()) END
FROM unnest(CAST(:ids AS uuid[]), CAST(:ok AS boolean[])) AS u(id, ok)
WHERE w.id = u.id
""")


async def record_attempts(session: AsyncSession, outcomes: list[dict[str, Any]]) -> None:
    """Attempts' outcomes, in three statements however many (a delivery deleted meanwhile with its endpoint is
    skipped): the attempts list, the deliveries (done, failed, or
    due again at `next_attempt_at`), and each endpoint's health by its last outcome here. An outcome is the claimed
    delivery with `status` (succeeded, retrying, failed), `status_code`, `error`, `response`, `duration_ms`,
    `next_attempt_at`."""
    if not outcomes:
        return
    await session.execute(_ATTEMPTS, {
        "ids": [uuid.uuid4() for _ in outcomes], "deliveries": [o["id"] for o in outcomes],
        "attempts": [int(o["attempts"]) + 1 for o in outcomes], "statuses": [o["status"] for o in outcomes],
        "codes": [o["status_code"] for o in outcomes], "errors": [o["error"] for o in outcomes],
        "responses": [o["response"] for o in outcomes], "durations": [o["duration_ms"] for o in outcomes],
        "next_at": [o["next_attempt_at"] for o in outcomes]})
    await session.execute(_RECORD, {
        "ids": [o["id"] for o in outcomes], "attempts": [int(o["attempts"]) + 1 for o in outcomes],
        "statuses": ["pending" if o["status"] == "retrying" else o["status"] for o in outcomes],
        "next_at": [o["next_attempt_at"] for o in outcomes]})
    last = {o["webhook_id"]: o["status"] == "succeeded" for o in outcomes}
    ids = sorted(last)  # rows locked in one order by every sender: no deadlock between two batches
    await session.execute(_HEALTH, {"ids": ids, "ok": [last[w] for w in ids]})


async def disable_failing(session: AsyncSession, webhook_ids: list[uuid.UUID], before: datetime,
                          reason: str) -> int:
    """Disable those of these endpoints that have failed since before `before`; how many it did now."""
    res = await session.execute(
        update(webhooks).where(webhooks.c.id.in_(webhook_ids), webhooks.c.enabled.is_(True),
                               webhooks.c.failing_since < before)
        .values(enabled=False, disabled_reason=reason, updated_at=func.now()))
    return int(res.rowcount)  # type: ignore[attr-defined]


async def release(session: AsyncSession, delivery_ids: list[uuid.UUID]) -> None:
    """Hand claimed deliveries back unattempted (a stopping sender): due again at once for any sender."""
    if delivery_ids:
        await session.execute(update(webhook_deliveries).where(webhook_deliveries.c.id.in_(delivery_ids),
                                                               webhook_deliveries.c.status == "pending")
                              .values(locked_until=None))


async def purge_before(session: AsyncSession, before: datetime) -> int:
    """Forget events (with their deliveries and attempts) older than `before` whose deliveries are all finished."""
    pending = select(literal(1)).where(webhook_deliveries.c.event_id == webhook_events.c.id,
                                       webhook_deliveries.c.status == "pending").exists()
    res = await session.execute(delete(webhook_events).where(webhook_events.c.created_at < before, ~pending))
    return int(res.rowcount)  # type: ignore[attr-defined]
