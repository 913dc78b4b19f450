"""Managing webhook endpoints (REST /api/v1/webhooks and the Integrations page): add one with its events (the
signing secret is shown once, here and on rotation), change, remove, read its recent deliveries, send a test
event or re-send one. Endpoints cover the whole library: a folder-scoped token may neither read nor manage them.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from datetime import timedelta
from typing import Any

import httpx

from lev.auth.policy import Principal, require, require_whole_library
from lev.core import clock, weburl
from lev.core.errors import ApiError, address_refused, found, invalid_body, limit_reached, not_found
from lev.net.guard import AddressRefused, check_host
from lev.plumbing.deps import Deps
from lev.plumbing.ports import Outbound
from lev.store import webhooks as webhook_store
from lev.webhooks import events

SECRET_BYTES = 24
OLD_SECRET_GRACE = timedelta(hours=24)
DELIVERIES_SHOWN = 50
MAX_URL_CHARS = 2048


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and base64 of 24 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def shape(row: dict[str, Any]) -> dict[str, Any]:
    """An endpoint as the API shows it (never its secret)."""
    return {
        "id": str(row["id"]), "url": row["url"], "description": row["description"], "events": list(row["events"]),
        "enabled": row["enabled"], "disabled_reason": row["disabled_reason"],
        "failing_since": row["failing_since"].isoformat() if row["failing_since"] else None,
        "created_at": row["created_at"].isoformat(), "updated_at": row["updated_at"].isoformat(),
    }


def shape_attempt(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(row["id"]), "delivery_id": str(row["delivery_id"]), "event": row["event_type"],
        "event_id": row["event_id"], "attempt": row["attempt"], "status": row["status"],
        "status_code": row["status_code"], "error": row["error"], "response": row["response"],
        "duration_ms": row["duration_ms"],
        "next_attempt_at": row["next_attempt_at"].isoformat() if row["next_attempt_at"] else None,
        "created_at": row["created_at"].isoformat(),
    }


async def check_url(outbound: Outbound, url: str) -> str:
    """The endpoint URL when it is http(s) and its host resolves to addresses deliveries may reach; else 400
    invalid_body (not an http(s) URL) or address_refused (an address refused, or none), saying why. (Each delivery
    checks the address again when it connects.)"""
    url = weburl.http_url(url, "url", max_chars=MAX_URL_CHARS)
    parsed = httpx.URL(url)
    try:
        await check_host(outbound, parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80))
    except AddressRefused as exc:
        raise exc.refused_as("The endpoint's address") from None
    except ApiError as exc:  # its host resolves to nothing: no delivery could reach it
        raise address_refused(f"The endpoint's address is refused: {exc.message or exc.code}.") from None
    return url


def _events(names: list[str]) -> list[str]:
    unique = list(dict.fromkeys(names))
    unknown = [n for n in unique if n not in events.EVENT_TYPES]
    if unknown or not unique:
        raise invalid_body(f"Unknown event {', '.join(unknown) or '(none given)'}; the events are "
                           f"{', '.join(events.EVENT_TYPES)}.")
    return unique


def _manage(p: Principal) -> None:
    require(p, "write")
    require_whole_library(p, "manage webhooks")


def _description(value: str | None) -> str | None:
    return (value or "").strip()[:500] or None


async def create(deps: Deps, p: Principal, body: dict[str, Any]) -> dict[str, Any]:
    """A new endpoint, with its secret (shown only in this answer)."""
    _manage(p)
    wanted = _events(body["events"])
    url = await check_url(deps.outbound, body["url"])
    cap = deps.settings.webhook_max_per_user
    secret = new_secret()
    async with deps.db.transaction() as s:
        used = await webhook_store.count_for_user(s, p.user_id)
        if used >= cap:
            raise limit_reached(f"You have {used} webhook endpoints, the most one account may have ({cap}); remove "
                                "one first.", cap=cap, used=used)
        row = await webhook_store.create(s, user_id=p.user_id, url=url, events=wanted,
                                         description=_description(body.get("description")), secret=secret)
    return {**shape(row), "secret": secret}


async def list_all(deps: Deps, p: Principal) -> list[dict[str, Any]]:
    require_whole_library(p, "read webhooks")
    async with deps.db.read_session() as s:
        return [shape(r) for r in await webhook_store.list_for_user(s, p.user_id)]


async def get(deps: Deps, p: Principal, webhook_id: uuid.UUID) -> dict[str, Any]:
    require_whole_library(p, "read webhooks")
    async with deps.db.read_session() as s:
        return shape(found(await webhook_store.get(s, p.user_id, webhook_id)))


async def update(deps: Deps, p: Principal, webhook_id: uuid.UUID, body: dict[str, Any]) -> dict[str, Any]:
    """Change events, enabled or description (never the secret: rotate it)."""
    _manage(p)
    values: dict[str, Any] = {}
    if "events" in body:
        values["events"] = _events(body["events"])
    if "description" in body:
        values["description"] = _description(body["description"])
    if "enabled" in body:
        values["enabled"] = bool(body["enabled"])
        if values["enabled"]:  # a fresh start: the three days count from the next failure
            values.update(disabled_reason=None, failing_since=None)
        else:
            values["disabled_reason"] = "disabled by you"
    async with deps.db.transaction() as s:
        return shape(found(await webhook_store.update_endpoint(s, p.user_id, webhook_id, values)))


async def delete(deps: Deps, p: Principal, webhook_id: uuid.UUID) -> dict[str, Any]:
    _manage(p)
    async with deps.db.transaction() as s:
        if not await webhook_store.delete_endpoint(s, p.user_id, webhook_id):
            raise not_found()
    return {"id": str(webhook_id), "deleted": True}


async def rotate(deps: Deps, p: Principal, webhook_id: uuid.UUID) -> dict[str, Any]:
    """A new secret (shown only in this answer); deliveries carry a signature by the old one too for 24 hours."""
    _manage(p)
    secret = new_secret()
    async with deps.db.transaction() as s:
        if not await webhook_store.rotate_secret(s, p.user_id, webhook_id, secret, clock.now() + OLD_SECRET_GRACE):
            raise not_found()
        row = await webhook_store.get(s, p.user_id, webhook_id)
    assert row is not None
    return {**shape(row), "secret": secret}


async def deliveries(deps: Deps, p: Principal, webhook_id: uuid.UUID) -> list[dict[str, Any]]:
    """The endpoint's most recent attempts, newest first."""
    require_whole_library(p, "read webhooks")
    async with deps.db.read_snapshot() as s:
        found(await webhook_store.get(s, p.user_id, webhook_id))
        return [shape_attempt(r) for r in await webhook_store.attempts(s, webhook_id, DELIVERIES_SHOWN)]


async def _enabled(s: Any, p: Principal, webhook_id: uuid.UUID) -> dict[str, Any]:
    row = found(await webhook_store.get(s, p.user_id, webhook_id, lock=True))
    if not row["enabled"]:
        raise ApiError("endpoint_disabled", "This endpoint is disabled: enable it first (PATCH enabled: true).")
    return row


async def send_test(deps: Deps, p: Principal, webhook_id: uuid.UUID) -> dict[str, Any]:
    """A `webhook.test` event to this endpoint alone."""
    _manage(p)
    event_id = events.new_event_id()
    async with deps.db.transaction() as s:
        await _enabled(s, p, webhook_id)
        body = events.payload(events.TEST_EVENT, {"webhook_id": str(webhook_id),
                                                  "message": "A test event from Lev."})
        ids = await webhook_store.add_event(s, event_id=event_id, user_id=p.user_id, event_type=events.TEST_EVENT,
                                            payload=body, webhook_ids=[webhook_id])
        events.nudge_after_commit(s, ids)
    return {"event_id": event_id, "delivery_id": str(ids[0])}


async def resend(deps: Deps, p: Principal, webhook_id: uuid.UUID, attempt_id: uuid.UUID) -> dict[str, Any]:
    """The event of one of the endpoint's deliveries, sent again (the same `webhook-id`, a fresh schedule)."""
    _manage(p)
    async with deps.db.transaction() as s:
        await _enabled(s, p, webhook_id)
        event_id = await webhook_store.attempt_event(s, webhook_id, attempt_id)
        if event_id is None or not await webhook_store.event_exists(s, event_id):
            raise not_found()
        ids = await webhook_store.add_deliveries(s, event_id, [webhook_id])
        events.nudge_after_commit(s, ids)
    return {"event_id": event_id, "delivery_id": str(ids[0])}
