"""Webhook operations: list, add (the secret shown once), get, update, remove, rotate the secret, the deliveries
list, a test event and a re-send."""

from __future__ import annotations

from typing import Any

from lev.auth.policy import parse_uuid
from lev.core import context
from lev.handlers import deps, principal
from lev.webhooks import service as webhooks


async def list_webhooks(token_info: dict[str, Any]) -> dict[str, Any]:
    found = await webhooks.list_all(deps(), principal(token_info))
    context.note_results(len(found))
    return {"webhooks": found}


async def create_webhook(body: dict[str, Any], token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    return await webhooks.create(deps(), principal(token_info), body), 201


async def get_webhook(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await webhooks.get(deps(), principal(token_info), parse_uuid(id_))


async def update_webhook(id_: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    return await webhooks.update(deps(), principal(token_info), parse_uuid(id_), body)


async def delete_webhook(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await webhooks.delete(deps(), principal(token_info), parse_uuid(id_))


async def rotate_webhook_secret(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await webhooks.rotate(deps(), principal(token_info), parse_uuid(id_))


async def list_webhook_deliveries(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    found = await webhooks.deliveries(deps(), principal(token_info), parse_uuid(id_))
    context.note_results(len(found))
    return {"deliveries": found}


async def resend_webhook_delivery(id_: str, delivery_id: str, token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    return await webhooks.resend(deps(), principal(token_info), parse_uuid(id_), parse_uuid(delivery_id)), 202


async def test_webhook(id_: str, token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    return await webhooks.send_test(deps(), principal(token_info), parse_uuid(id_)), 202
