"""Sharing operations: invitations (send, a new link, read and answer by link, list, accept, decline, withdraw),
members (list, change a role, remove or leave) and a folder's publication (turn on, read, turn off)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from lev.auth.policy import parse_uuid
from lev.handlers import deps, principal
from lev.sharing import service as sharing


async def create_invitation(id_: str, body: dict[str, Any], token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    return await sharing.invite(deps(), principal(token_info), parse_uuid(id_), body), 201


async def create_invitation_link(id_: str, invitation_id: str,
                                 token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    return await sharing.new_link(deps(), principal(token_info), parse_uuid(id_), parse_uuid(invitation_id)), 201


async def get_invitation_link(code: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await sharing.by_link(deps(), principal(token_info), code)


async def answer_invitation_link(code: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    return await sharing.answer_link(deps(), principal(token_info), code, body)


async def list_invitations(token_info: dict[str, Any]) -> dict[str, Any]:
    return await sharing.invitations(deps(), principal(token_info))


async def accept_invitation(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await sharing.answer(deps(), principal(token_info), parse_uuid(id_), accept=True)


async def decline_invitation(id_: str, token_info: dict[str, Any]) -> Response:
    await sharing.answer(deps(), principal(token_info), parse_uuid(id_), accept=False)
    return Response(status_code=204)


async def delete_invitation(id_: str, invitation_id: str, token_info: dict[str, Any]) -> Response:
    await sharing.withdraw(deps(), principal(token_info), parse_uuid(id_), parse_uuid(invitation_id))
    return Response(status_code=204)


async def list_members(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await sharing.members(deps(), principal(token_info), parse_uuid(id_))


async def update_member(id_: str, user_id: str, body: dict[str, Any], token_info: dict[str, Any]) -> dict[str, Any]:
    return await sharing.set_role(deps(), principal(token_info), parse_uuid(id_), parse_uuid(user_id), body)


async def delete_member(id_: str, user_id: str, token_info: dict[str, Any]) -> Response:
    await sharing.remove(deps(), principal(token_info), parse_uuid(id_), parse_uuid(user_id))
    return Response(status_code=204)


async def publish_folder(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await sharing.publish(deps(), principal(token_info), parse_uuid(id_))


async def get_publication(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await sharing.publication(deps(), principal(token_info), parse_uuid(id_))


async def unpublish_folder(id_: str, token_info: dict[str, Any]) -> Response:
    await sharing.unpublish(deps(), principal(token_info), parse_uuid(id_))
    return Response(status_code=204)
