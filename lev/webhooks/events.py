"""The webhook outbox's one way in: `record` (and the item helpers built on it) writes an event and its
deliveries in the caller's transaction, the one that makes the event true, and wakes the senders
(`lev.webhooks.sender`) once that transaction has committed. A rollback takes the event with it (never invented); a
crash after the commit leaves the deliveries in PostgreSQL, where a sender's sweep finds them (never lost).

Call it inside a transaction of `deps.db` (every session comes from the injected `Database`, which carries the
Redis the nudge goes to). A user without an endpoint for the event type costs one indexed query.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.core import clock
from lev.ops import logs
from lev.plumbing.ports import Redis
from lev.store import webhooks as webhook_store
from lev.store.db import after_commit

log = logs.get_logger("lev.webhooks")

EVENT_TYPES = ("item.created", "item.ready", "item.failed", "item.deleted", "import.finished", "feed.failing",
               "highlight.created", "highlight.deleted", "item.updated")
TEST_EVENT = "webhook.test"  # sent by POST /webhooks/{id}/test to that endpoint alone; no one subscribes to it
NUDGE_INFO = "nudge"  # the session.info key of the Redis client that wakes the senders (lev.runtime sets it)
NUDGE_CHANNEL = "lev:webhooks:due"  # the senders listen here; the message says only "look now"


def new_event_id() -> str:
    """A Standard Webhooks message id (`webhook-id`): the same on every attempt and re-send of the event."""
    return f"msg_{uuid.uuid4().hex}"


def payload(event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    """The body receivers get: `{type, timestamp, data}`."""
    return {"type": event_type, "timestamp": clock.now().isoformat().replace("+00:00", "Z"), "data": data}


async def record(s: AsyncSession, user_id: uuid.UUID, event_type: str, data: dict[str, Any]) -> None:
    """Record `event_type` with `data` for the user's endpoints that take it (none: nothing is written)."""
    hooks = await webhook_store.subscribers(s, user_id, event_type)
    if hooks:
        await _write(s, user_id, event_type, data, hooks)


async def _write(s: AsyncSession, user_id: uuid.UUID, event_type: str, data: dict[str, Any],
                 hooks: list[uuid.UUID]) -> None:
    ids = await webhook_store.add_event(s, event_id=new_event_id(), user_id=user_id, event_type=event_type,
                                        payload=payload(event_type, data), webhook_ids=hooks)
    nudge_after_commit(s, ids)


def nudge_after_commit(s: AsyncSession, delivery_ids: list[uuid.UUID]) -> None:
    """Wake the senders once `s` has committed these deliveries, through the Redis its database carries
    (`Deps.db`); a transaction without one leaves them to the senders' sweep."""
    redis = s.info.get(NUDGE_INFO)
    if redis is None or not delivery_ids or s.info.get(_NUDGING):
        return
    s.info[_NUDGING] = True

    async def nudge() -> None:
        await wake_senders(redis)

    after_commit(s, nudge)


_NUDGING = "lev_webhooks_nudging"  # one message per transaction, however many events it recorded


async def wake_senders(redis: Redis) -> None:
    """Tell every sender to look now. A failure only costs latency: each sender sweeps every few seconds."""
    try:
        await redis.publish(NUDGE_CHANNEL, "1")
    except Exception as exc:  # Redis away: the deliveries wait in PostgreSQL for the sweep
        log.warning("could not wake the webhook senders; their sweep will find the deliveries",
                    error=type(exc).__name__)


def item_data(row: dict[str, Any]) -> dict[str, Any]:
    """What an item event tells a receiver."""
    return {
        "item_id": str(row["id"]), "content_id": str(row["content_id"]), "url": row["url"], "title": row["title"],
        "kind": row["kind"], "status": row["status"], "error": row["error"],
        "folder_ids": sorted(str(f) for f in row["folder_ids"] or []),
    }


def deleting(s: AsyncSession) -> Callable[[list[uuid.UUID]], Awaitable[None]]:
    """The `before_delete` of the item deletes (store.items, store.folders): item.deleted for each item."""
    async def before_delete(item_ids: list[uuid.UUID]) -> None:
        await items_changed(s, "item.deleted", item_ids=item_ids)

    return before_delete


async def items_changed(s: AsyncSession, event_type: str, *, item_ids: list[uuid.UUID] | None = None,
                        content_id: uuid.UUID | None = None) -> None:
    """Record `event_type` for each of these items (or each item of a content), as they are now in `s`, for its
    owner's endpoints. Call it before a delete (item.deleted) and after the change otherwise."""
    if item_ids is not None and not item_ids:
        return
    for row in await webhook_store.items_with_subscribers(s, event_type, item_ids=item_ids, content_id=content_id):
        await _write(s, row["user_id"], event_type, item_data(row), list(row["webhook_ids"]))


def updated_data(row: dict[str, Any], changed: list[str]) -> dict[str, Any]:
    """What item.updated tells a receiver: the item, which of its fields changed, and its tags and reading state."""
    return {**item_data(row), "changed": changed, "tags": list(row["tags"] or []),
            "read_at": row["read_at"].isoformat() if row["read_at"] else None,
            "progress": round(float(row["progress"]), 4)}


async def items_updated(s: AsyncSession, item_ids: list[uuid.UUID], changed: list[str]) -> None:
    """item.updated for each of these items, as they are now in `s` (after the change), naming the fields changed
    (`tags`, `read_at`, `progress`, `title`, `in_kb`, `archived`)."""
    if not item_ids or not changed:
        return
    for row in await webhook_store.items_with_subscribers(s, "item.updated", item_ids=item_ids):
        await _write(s, row["user_id"], "item.updated", updated_data(row, changed), list(row["webhook_ids"]))
