"""Webhook work in the worker: the outbox's sender (lev.webhooks.sender), started and stopped with the worker, and
the hourly purge of finished events older than 30 days."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from lev.core import clock
from lev.plumbing.deps import Deps
from lev.store import webhooks as webhook_store
from lev.webhooks.sender import Sender

EVENT_RETENTION = timedelta(days=30)
SENDER = "webhook_sender"  # its ctx key


def start_sender(ctx: dict[str, Any], deps: Deps) -> None:
    sender = Sender(deps)
    sender.start()
    ctx[SENDER] = sender


async def stop_sender(ctx: dict[str, Any], grace_sec: float) -> None:
    sender: Sender | None = ctx.pop(SENDER, None)
    if sender is not None:
        await sender.stop(grace_sec)


async def purge_webhook_events(ctx: dict[str, Any]) -> int:
    """Forget finished events older than 30 days (with their deliveries and attempts)."""
    async with ctx["deps"].db.transaction() as s:
        return await webhook_store.purge_before(s, clock.now() - EVENT_RETENTION)
