"""OAuth 2.1 rows: registered clients (dynamic registration and cached client ID metadata documents),
authorization codes and refresh tokens. The grants themselves are rows of `tokens` (store/tokens.py).

Only SHA-256 digests of codes, refresh tokens and client secrets are stored; callers hash.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.models import oauth_clients, oauth_codes, oauth_refresh_tokens, tokens, users


async def get_client(session: AsyncSession, client_id: str) -> dict[str, Any] | None:
    row = (await session.execute(select(oauth_clients).where(oauth_clients.c.client_id == client_id))).first()
    return dict(row._mapping) if row else None


async def save_client(session: AsyncSession, *, client_id: str, kind: str, client_name: str | None,
                      client_uri: str | None, redirect_uris: list[str], auth_method: str, secret_hash: bytes | None,
                      metadata: dict[str, Any], stale_at: datetime | None) -> None:
    """Insert a client, or refresh a cached metadata document's row."""
    values = {"client_name": client_name, "client_uri": client_uri, "redirect_uris": redirect_uris,
              "auth_method": auth_method, "secret_hash": secret_hash, "metadata": metadata, "stale_at": stale_at}
    stmt = pg_insert(oauth_clients).values(client_id=client_id, kind=kind, **values)
    await session.execute(stmt.on_conflict_do_update(index_elements=["client_id"], set_=values))


async def insert_code(session: AsyncSession, *, code_hash: bytes, user_id: uuid.UUID, client_id: str,
                      redirect_uri: str, code_challenge: str, resource: str, choice: dict[str, Any],
                      expires_at: datetime) -> None:
    await session.execute(insert(oauth_codes).values(
        code_hash=code_hash, user_id=user_id, client_id=client_id, redirect_uri=redirect_uri,
        code_challenge=code_challenge, resource=resource, choice=choice, expires_at=expires_at))


async def lock_code(session: AsyncSession, code_hash: bytes) -> dict[str, Any] | None:
    """The code with its user (tier, email), locked until the transaction ends: two exchanges of one code run one
    after the other, so the second sees the first's use."""
    q = (select(oauth_codes, users.c.tier, users.c.email)
         .join(users, users.c.id == oauth_codes.c.user_id)
         .where(oauth_codes.c.code_hash == code_hash).with_for_update(of=oauth_codes))
    row = (await session.execute(q)).first()
    return dict(row._mapping) if row else None


async def void_codes(session: AsyncSession, user_id: uuid.UUID) -> int:
    """Void the user's authorization codes not yet exchanged (they expire now): after a password change, a code
    issued before it cannot mint a grant. An exchange in flight holds its code's row, so it finishes first."""
    res = await session.execute(update(oauth_codes)
                                .where(oauth_codes.c.user_id == user_id, oauth_codes.c.used_at.is_(None),
                                       oauth_codes.c.expires_at > func.now())
                                .values(expires_at=func.now()))
    return int(res.rowcount)  # type: ignore[attr-defined]


async def mark_code_used(session: AsyncSession, code_hash: bytes, token_id: uuid.UUID) -> None:
    await session.execute(update(oauth_codes).where(oauth_codes.c.code_hash == code_hash)
                          .values(used_at=func.now(), token_id=token_id))


async def insert_refresh(session: AsyncSession, token_hash: bytes, token_id: uuid.UUID) -> None:
    await session.execute(insert(oauth_refresh_tokens).values(token_hash=token_hash, token_id=token_id))


async def lock_refresh(session: AsyncSession, token_hash: bytes) -> dict[str, Any] | None:
    """A refresh token with its grant (the tokens row, the owner's tier), both locked until the transaction ends."""
    q = (select(oauth_refresh_tokens.c.token_hash, oauth_refresh_tokens.c.rotated_at,
                oauth_refresh_tokens.c.token_id, tokens.c.client_id, tokens.c.resource, tokens.c.revoked_at,
                tokens.c.expires_at, tokens.c.capabilities, users.c.tier)
         .join(tokens, tokens.c.id == oauth_refresh_tokens.c.token_id)
         .join(users, users.c.id == tokens.c.user_id)
         .where(oauth_refresh_tokens.c.token_hash == token_hash)
         .with_for_update(of=[oauth_refresh_tokens, tokens]))
    row = (await session.execute(q)).first()
    return dict(row._mapping) if row else None


async def rotate_refresh(session: AsyncSession, token_hash: bytes) -> None:
    await session.execute(update(oauth_refresh_tokens).where(oauth_refresh_tokens.c.token_hash == token_hash)
                          .values(rotated_at=func.now()))


async def grant_of(session: AsyncSession, client_id: str, token_hash: bytes) -> uuid.UUID | None:
    """The grant of `client_id` that an access or refresh token (by digest) belongs to, else None."""
    by_access = select(tokens.c.id).where(tokens.c.token_hash == token_hash, tokens.c.kind == "oauth",
                                          tokens.c.client_id == client_id)
    by_refresh = (select(tokens.c.id).join(oauth_refresh_tokens, oauth_refresh_tokens.c.token_id == tokens.c.id)
                  .where(oauth_refresh_tokens.c.token_hash == token_hash, tokens.c.client_id == client_id))
    for q in (by_access, by_refresh):
        found = (await session.execute(q)).scalar_one_or_none()
        if found is not None:
            return found  # type: ignore[no-any-return]
    return None


async def purge(session: AsyncSession, codes_before: datetime, clients_before: datetime) -> tuple[int, int]:
    """Delete authorization codes that expired before `codes_before`, and dynamically registered clients made before
    `clients_before` that never received a grant. Returns (codes, clients) deleted."""
    codes = await session.execute(delete(oauth_codes).where(oauth_codes.c.expires_at < codes_before))
    granted = exists().where(tokens.c.client_id == oauth_clients.c.client_id)
    clients = await session.execute(delete(oauth_clients).where(
        oauth_clients.c.kind == "dcr", oauth_clients.c.created_at < clients_before, ~granted))
    return int(codes.rowcount), int(clients.rowcount)  # type: ignore[attr-defined]
