"""Webhook jobs: one delivery attempt (lev.webhooks.deliver), and the sweep that re-queues due deliveries whose job
is missing and forgets finished events after 30 days."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from lev.core import clock
from lev.store import webhooks as webhook_store
from lev.webhooks.deliver import attempt, requeue_due

EVENT_RETENTION = timedelta(days=30)


async def deliver_webhook(ctx: dict[str, Any], delivery_id: str) -> str | None:
    """One attempt of a delivery (its outcome, or None when there was nothing to do)."""
    return await attempt(ctx["deps"], uuid.UUID(delivery_id))


async def sweep_webhooks(ctx: dict[str, Any]) -> int:
    """Re-queue due deliveries whose job is missing; forget finished events older than 30 days."""
    queued = await requeue_due(ctx["deps"])
    async with ctx["deps"].db.transaction() as s:
        await webhook_store.purge_before(s, clock.now() - EVENT_RETENTION)
    return queued
