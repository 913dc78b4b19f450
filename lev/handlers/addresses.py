"""The account's address verified by mail (under /api/account, cookie sessions): send the mail, confirm its code."""

from __future__ import annotations

from typing import Any

from lev.auth import addresses
from lev.handlers import deps, principal


async def send_email_verification(token_info: dict[str, Any]) -> dict[str, Any]:
    return await addresses.send_verification(deps(), principal(token_info))


async def confirm_email(code: str, token_info: dict[str, Any]) -> dict[str, Any]:
    return await addresses.confirm(deps(), principal(token_info), code)
