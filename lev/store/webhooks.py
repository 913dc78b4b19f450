"""Webhooks: the user's endpoints (with their signing secrets, kept only here), the outbox of events and their
deliveries (one per event and endpoint, written in the transaction that makes the event true), and the attempts
the deliveries list shows."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, func, insert, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

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
        await session.execute(insert(webhook_deliveries), [
            {"id": d, "webhook_id": w, "event_id": event_id, "status": "pending", "attempts": 0}
            for d, w in zip(ids, webhook_ids, strict=True)])
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


async def claim(session: AsyncSession, delivery_id: uuid.UUID, lease_sec: float) -> dict[str, Any] | None:
    """Take a due pending delivery for one attempt (no one else takes it for `lease_sec`): its endpoint, secrets
    and event. None when it is finished, not due, taken, or its endpoint is disabled."""
    lease = func.now() + func.make_interval(0, 0, 0, 0, 0, 0, lease_sec)
    claimed = (await session.execute(
        update(webhook_deliveries)
        .where(webhook_deliveries.c.id == delivery_id, webhook_deliveries.c.status == "pending",
               webhook_deliveries.c.next_attempt_at <= func.now(),
               or_(webhook_deliveries.c.locked_until.is_(None), webhook_deliveries.c.locked_until < func.now()),
               webhook_deliveries.c.webhook_id.in_(select(webhooks.c.id).where(webhooks.c.enabled.is_(True))))
        .values(locked_until=lease).returning(webhook_deliveries.c.id))).first()
    if claimed is None:
        return None
    row = (await session.execute(
        select(webhook_deliveries.c.id, webhook_deliveries.c.webhook_id, webhook_deliveries.c.event_id,
               webhook_deliveries.c.attempts, webhooks.c.url, webhooks.c.secret, webhooks.c.previous_secret,
               webhooks.c.previous_secret_until, webhooks.c.failing_since, webhook_events.c.type,
               webhook_events.c.payload, (webhooks.c.previous_secret_until > func.now()).label("old_valid"))
        .join(webhooks, webhooks.c.id == webhook_deliveries.c.webhook_id)
        .join(webhook_events, webhook_events.c.id == webhook_deliveries.c.event_id)
        .where(webhook_deliveries.c.id == delivery_id))).one()
    return _row(row)


async def record_attempt(session: AsyncSession, delivery: dict[str, Any], *, status: str, status_code: int | None,
                         error: str | None, response: str | None, duration_ms: int,
                         next_attempt_at: datetime | None) -> None:
    """One attempt's outcome: the attempts list, the delivery (done, failed, or due again), the endpoint's health."""
    attempt = int(delivery["attempts"]) + 1
    await session.execute(insert(webhook_attempts).values(
        id=uuid.uuid4(), delivery_id=delivery["id"], webhook_id=delivery["webhook_id"],
        event_id=delivery["event_id"], event_type=delivery["type"], attempt=attempt, status=status,
        status_code=status_code, error=error, response=response, duration_ms=duration_ms,
        next_attempt_at=next_attempt_at))
    values: dict[str, Any] = {"attempts": attempt, "locked_until": None}
    if status == "retrying":
        values["next_attempt_at"] = next_attempt_at
    else:
        values.update(status="succeeded" if status == "succeeded" else "failed", finished_at=func.now())
    await session.execute(update(webhook_deliveries).where(webhook_deliveries.c.id == delivery["id"]).values(**values))
    health = {"failing_since": None} if status == "succeeded" else {
        "failing_since": func.coalesce(webhooks.c.failing_since, func.now())}
    await session.execute(update(webhooks).where(webhooks.c.id == delivery["webhook_id"]).values(**health))


async def disable_if_failing_since(session: AsyncSession, webhook_id: uuid.UUID, before: datetime,
                                   reason: str) -> bool:
    """Disable an endpoint that has failed since before `before`; True when it did now."""
    res = await session.execute(
        update(webhooks).where(webhooks.c.id == webhook_id, webhooks.c.enabled.is_(True),
                               webhooks.c.failing_since < before)
        .values(enabled=False, disabled_reason=reason, updated_at=func.now()))
    return bool(res.rowcount)  # type: ignore[attr-defined]


async def due(session: AsyncSession, settled_before: datetime, limit: int = 1000) -> list[dict[str, Any]]:
    """Pending deliveries due before `settled_before` and not taken: those whose job was lost."""
    rows = await session.execute(
        select(webhook_deliveries.c.id, webhook_deliveries.c.attempts)
        .join(webhooks, webhooks.c.id == webhook_deliveries.c.webhook_id)
        .where(webhook_deliveries.c.status == "pending", webhook_deliveries.c.next_attempt_at < settled_before,
               webhooks.c.enabled.is_(True),
               or_(webhook_deliveries.c.locked_until.is_(None), webhook_deliveries.c.locked_until < func.now()))
        .order_by(webhook_deliveries.c.next_attempt_at).limit(limit))
    return [_row(r) for r in rows]


async def purge_before(session: AsyncSession, before: datetime) -> int:
    """Forget events (with their deliveries and attempts) older than `before` whose deliveries are all finished."""
    pending = select(literal(1)).where(webhook_deliveries.c.event_id == webhook_events.c.id,
                                       webhook_deliveries.c.status == "pending").exists()
    res = await session.execute(delete(webhook_events).where(webhook_events.c.created_at < before, ~pending))
    return int(res.rowcount)  # type: ignore[attr-defined]
