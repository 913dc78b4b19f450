"""The password rule and the one password change that the account API, the account page and `lev user set-password`
all run: the new password is checked and stored, and everything the old one let in ends with it (every token and
OAuth grant, every browser session, every authorization code not yet exchanged)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from lev.core.errors import invalid_body
from lev.store import oauth as oauth_store
from lev.store import sessions as session_store
from lev.store import tokens as token_store
from lev.store import users as user_store

MIN_CHARS, MAX_CHARS = 8, 1000


def check_new_password(password: str) -> None:
    """400 invalid_body unless the password is 8 to 1000 characters long."""
    if len(password) < MIN_CHARS or len(password) > MAX_CHARS:
        raise invalid_body(f"The password must be {MIN_CHARS} to {MAX_CHARS} characters long.")


@dataclass(frozen=True)
class PasswordChanged:
    revoked_tokens: int  # tokens and OAuth grants
    ended_sessions: int
    voided_codes: int


async def set_password(s: AsyncSession, user_id: uuid.UUID, new: str) -> PasswordChanged:
    """Set the user's password (after the password rule) and end what the old one let in, in one transaction.

    The statements run in this order, each waiting for what it conflicts with: the user's row is updated first; the
    sessions are deleted (a code being issued in one of them holds it, and is committed before they go); then codes
    not yet exchanged are voided (an exchange in flight holds its code: it finishes first, and its grant is then
    revoked with the rest). The caller commits and then announces the change to the principal caches."""
    check_new_password(new)
    await user_store.set_password(s, user_id, new)
    ended = await session_store.end_all(s, user_id)
    voided = await oauth_store.void_codes(s, user_id)
    revoked = await token_store.revoke_all(s, user_id)
    return PasswordChanged(revoked_tokens=revoked, ended_sessions=ended, voided_codes=voided)
