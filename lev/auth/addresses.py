"""An account's address verified as its own: a mail with a secret link (when Lev has a mail server), confirmed by
the signed-in account. A verified address is what lets an account see and answer the invitations sent to it
without their links (`lev.sharing.service`)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from lev.auth.policy import Principal, require_manager
from lev.core import context
from lev.core.errors import ApiError, not_found, rate_limited, unavailable
from lev.plumbing.deps import Deps
from lev.plumbing.ports import MailError
from lev.store import users as user_store

VERIFY_PATH = "/verify-email/"
CODE_HOURS = 48
RESEND_SEC = 60  # one verification mail a minute per account at most


def _digest(code: str) -> bytes:
    return hashlib.sha256(code.encode()).digest()


def _state(user: dict[str, Any]) -> dict[str, Any]:
    return {"email": user["email"], "email_verified": user.get("email_verified_at") is not None}


async def send_verification(deps: Deps, p: Principal) -> dict[str, Any]:
    """Mail the caller's address a link that verifies it (`sent`); nothing to send when it is verified already."""
    require_manager(p, "verify the account's address")
    code = secrets.token_urlsafe(32)
    async with deps.db.transaction() as s:
        user = await user_store.by_id(s, p.user_id)
        if user is None:
            raise not_found()
        if user.get("email_verified_at") is not None:
            return {**_state(user), "sent": False}
        if deps.mailer is None:
            raise ApiError("mail_unavailable", "This Lev sends no mail (its operator has not set LEV_SMTP_URL), so it "
                           "cannot verify your address by mail. Opening an invitation's link while signed in verifies "
                           "it too.")
        if await user_store.email_code_sent_since(s, p.user_id, RESEND_SEC):
            raise rate_limited(f"A verification mail was sent less than {RESEND_SEC} s ago; check your inbox, or "
                               "try again in a minute.", {"Retry-After": str(RESEND_SEC)}, retry_after_sec=RESEND_SEC)
        await user_store.add_email_code(s, p.user_id, user["email"], _digest(code),
                                        datetime.now(UTC) + timedelta(hours=CODE_HOURS))
    url = f"{context.base_url()}{VERIFY_PATH}{code}"
    try:
        await deps.mailer.send(user["email"], "Verify your address on Lev",
                               f"Open this link while signed in to Lev to verify that {user['email']} is yours "
                               f"(it works once, for {CODE_HOURS} hours):\n{url}\n\n"
                               "If you did not ask for this, ignore this mail.\n")
    except MailError as exc:
        raise unavailable(f"The mail server did not take the verification mail; try again later. ({exc})") from None
    return {**_state(user), "sent": True}


async def confirm(deps: Deps, p: Principal, code: str) -> dict[str, Any]:
    """Verify the caller's address with the code of the link mailed to it."""
    require_manager(p, "verify the account's address")
    async with deps.db.transaction() as s:
        found = await user_store.take_email_code(s, _digest(code))
        if found is None or found["user_id"] != p.user_id:
            raise not_found("This verification link does not work: it was used or it expired, or it was sent to "
                            "another account. Ask for a new one on your account page.")
        if not await user_store.verify_email(s, p.user_id, found["email"]):
            raise ApiError("address_changed", "Your account's address is no longer the one this link was sent to.")
        user = await user_store.by_id(s, p.user_id)
    assert user is not None
    return _state(user)


async def state(deps: Deps, p: Principal) -> dict[str, Any]:
    """The caller's address and whether Lev has verified it."""
    async with deps.db.read_session() as s:
        user = await user_store.by_id(s, p.user_id)
    if user is None:
        raise not_found()
    return _state(user)
