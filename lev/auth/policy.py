"""Authentication and the one scope policy: capabilities, folder scope, kb_only.

Every surface (REST handlers, MCP tools, the upload PUT) calls these functions; none re-implements them.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.core.errors import (
    capability_denied,
    folder_not_found,
    forbidden_scope,
    invalid_body,
    invalid_id,
    invalid_token,
    missing_bearer_token,
    not_found,
)
from lev.limits.tiers import Tiers, check_token_room
from lev.store import members as member_store
from lev.store import tokens as token_store
from lev.store.scope import Scope

TOKEN_PREFIX = "lev_"
TOKEN_SECRET_BYTES = 32  # token_urlsafe(32) -> 43 URL-safe characters


@dataclass(frozen=True)
class Principal:
    """An authenticated token, or a signed-in browser session (token_id None: whole library, read and write,
    not-in-KB items visible)."""

    token_id: uuid.UUID | None
    user_id: uuid.UUID
    name: str
    capabilities: frozenset[str]
    is_unscoped: bool
    folder_ids: frozenset[uuid.UUID]
    kb_only: bool
    write_cap: int
    tier: str
    extra: dict[str, object] = field(default_factory=dict, compare=False)
    file_into: uuid.UUID | None = field(default=None, compare=False)  # the ingest request's folder_id
    expires_at: datetime | None = field(default=None, compare=False)  # the credential's end (lev.auth.principal_cache)
    shared: frozenset[uuid.UUID] = frozenset()  # `Scope.shared`, read with the credential
    peers: frozenset[uuid.UUID] = frozenset()  # `Scope.peers`, likewise

    @property
    def scope(self) -> Scope:
        if self.is_unscoped:
            return Scope(self.user_id, None, self.kb_only, shared=self.shared, peers=self.peers)
        return Scope(self.user_id, self.folder_ids, self.kb_only, self.token_id, self.shared, self.peers)

    @property
    def new_item_folder(self) -> uuid.UUID | None:
        """The folder a new item is filed into: the one asked for at ingest, else the scope-size-1 folder."""
        return self.file_into or self.single_folder

    @property
    def single_folder(self) -> uuid.UUID | None:
        """The folder new items auto-file into (scope-size-1 rule), else None."""
        if not self.is_unscoped and len(self.folder_ids) == 1:
            return next(iter(self.folder_ids))
        return None


@dataclass(frozen=True)
class OAuthBinding:
    """What makes a minted token an OAuth grant: its client, the resource (RFC 8707 audience) it is good for, and
    when its first access token expires."""

    client_id: str
    resource: str
    access_expires_at: datetime


def new_token() -> tuple[str, bytes, str]:
    """A fresh token string, its SHA-256 digest and its display prefix."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_SECRET_BYTES)
    return token, hash_token(token), token[:12]


async def mint(
    session: AsyncSession, user: dict[str, Any], name: str, *, write: bool, folder_ids: list[uuid.UUID],
    kb_only: bool, expires_in_days: int, write_cap: int, tiers: Tiers, oauth: OAuthBinding | None = None,
) -> tuple[str, uuid.UUID]:
    """Mint a token for `user` (with `oauth`, an OAuth grant); 402 payment_required at the tier's token cap."""
    await check_token_room(session, tiers, user)
    if not name.strip():
        raise invalid_body("A token needs a name.")
    if expires_in_days < 1:
        raise invalid_body("expires-in-days must be at least 1.")
    if write_cap < 0:
        raise invalid_body("write-cap must be 0 (none) or more.")
    unique = list(dict.fromkeys(folder_ids))
    if unique:
        # the user's folders and those shared with them; none vanishes before the insert
        reached = await member_store.roles(session, user["id"], unique, lock=True)
        missing = [str(f) for f in unique if f not in reached]
        if missing:
            raise folder_not_found("Some folders do not exist.", missing=missing)
    token, digest, prefix = new_token()
    expires_at = datetime.now(UTC) + timedelta(days=expires_in_days)
    token_id = await token_store.insert_token(
        session, user_id=user["id"], name=name.strip()[:200], digest=digest, prefix=prefix, write=write,
        folder_ids=unique, kb_only=kb_only, write_cap=write_cap, expires_at=expires_at,
        kind="oauth" if oauth else "token", client_id=oauth.client_id if oauth else None,
        resource=oauth.resource if oauth else None,
        access_expires_at=min(oauth.access_expires_at, expires_at) if oauth else None,
    )
    return token, token_id


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def parse_bearer(authorization: str | None) -> str:
    """The token from an Authorization header, or 401 missing_bearer_token."""
    if not authorization:
        raise missing_bearer_token()
    parts = authorization.split(None, 1)
    if len(parts) != 2 or parts[0].lower() != "bearer" or not parts[1].strip():
        raise missing_bearer_token()
    return parts[1].strip()


async def authenticate(session: AsyncSession, token: str, audience: str | None = None) -> Principal:
    """Resolve a bearer token to a Principal, or 401 invalid_token (never saying which check failed).

    `audience` is the resource the request addresses (`{base}/api/mcp` on MCP, `{base}/api/v1` on REST): a
    hand-minted token works everywhere, an OAuth grant's access token only at the resource it was issued for
    (RFC 8707)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        raise invalid_token()
    digest = hash_token(token)
    row = await token_store.lookup_token(session, digest)
    if row is None or not hmac.compare_digest(row["token_hash"], digest):
        raise invalid_token()
    now = datetime.now(UTC)
    if row["revoked_at"] is not None or row["expires_at"] <= now or (
            row["access_expires_at"] is not None and row["access_expires_at"] <= now):
        raise invalid_token()
    if row["resource"] is not None and row["resource"] != audience:
        raise invalid_token(f"This token was issued for {row['resource']} and is accepted only there.")
    return Principal(
        token_id=row["id"],
        user_id=row["user_id"],
        name=row["name"],
        capabilities=frozenset(row["capabilities"]) | {"read"},
        is_unscoped=row["is_unscoped"],
        folder_ids=frozenset(row["folder_ids"] or ()),
        kb_only=row["kb_only"],
        write_cap=row["write_cap"],
        tier=row["tier"],
        extra={"oauth_client": row["client_id"]} if row["kind"] == "oauth" else {},
        # the credential's end: an OAuth access token ends with its hour (or its grant), a hand-minted one at expiry
        expires_at=row["expires_at"] if row["access_expires_at"] is None else min(row["expires_at"],
                                                                                   row["access_expires_at"]),
        shared=member_store.shared_ids(row),
        peers=member_store.peer_ids(row),
    )


def require(principal: Principal, capability: str) -> None:
    """403 capability_denied unless the token has `capability`."""
    if capability not in principal.capabilities:
        have = sorted(principal.capabilities)
        raise capability_denied(f"This token cannot {capability}: it was minted with {', '.join(have)}.",
                                required=capability, have=have)


def require_whole_library(principal: Principal, action: str) -> None:
    """403 forbidden_scope for folder-scoped tokens (folder create/delete)."""
    if not principal.is_unscoped:
        raise forbidden_scope(f"Only a whole-library token can {action}.")


def check_membership_targets(principal: Principal, folder_ids: list[uuid.UUID]) -> None:
    """Scope rules of POST /items/{id}/folders (target folders already known to exist and be owned)."""
    if principal.is_unscoped:
        return
    if len(principal.folder_ids) == 1:
        raise forbidden_scope("A single-folder token files new items automatically and cannot add folder memberships.",
        )
    outside = [f for f in folder_ids if f not in principal.folder_ids]
    if outside:
        raise forbidden_scope("Some target folders are outside this token's scope.",
            out_of_scope=[str(f) for f in outside],
        )


def filing_target(principal: Principal, folder_id: uuid.UUID | None) -> Principal:
    """The principal that files new items into `folder_id` (ingest's optional folder_id), or 403 forbidden_scope
    when that folder is outside a folder-scoped token's scope."""
    if folder_id is None:
        return principal
    if not principal.is_unscoped and folder_id not in principal.folder_ids:
        raise forbidden_scope("folder_id is outside this token's scope.", out_of_scope=[str(folder_id)])
    return replace(principal, file_into=folder_id)


def require_owner(role: str | None, action: str) -> None:
    """404 when the caller cannot reach the folder at all, 403 forbidden_scope when they are a member but not its
    owner (managing members, invitations, the public page, renaming and deleting are the owner's)."""
    if role is None:
        raise not_found()
    if role != member_store.OWNER:
        raise forbidden_scope(f"Only the folder's owner can {action}; you are one of its {role}s.", role=role)


def require_filer(role: str | None, folder_id: uuid.UUID) -> None:
    """404 folder_not_found when the caller cannot reach the folder, 403 forbidden_scope for a viewer: only the
    owner and editors add items to a folder."""
    if role is None:
        raise folder_not_found("There is no such folder.", missing=[str(folder_id)])
    if role not in (member_store.OWNER, member_store.EDITOR):
        raise forbidden_scope("You are a viewer of this shared folder: only its owner and editors add items to it.",
                              role=role)


def require_manager(principal: Principal, action: str) -> None:
    """Managing a folder's sharing needs a whole-library write token or the browser session (403 otherwise)."""
    require(principal, "write")
    require_whole_library(principal, action)


def folder_visible(scope: Scope, folder_id: uuid.UUID) -> bool:
    return scope.folder_ids is None or folder_id in scope.folder_ids


FOLDER_NAME_MAX_CHARS = 200  # FolderCreate.name, FolderUpdate.name


def folder_name(name: str) -> str:
    """A folder name trimmed, or 400 invalid_body when it is blank, too long or holds NUL."""
    clean = name.strip()
    if not clean or len(clean) > FOLDER_NAME_MAX_CHARS:
        raise invalid_body(f"name must be 1-{FOLDER_NAME_MAX_CHARS} characters after trimming.")
    if "\x00" in clean:  # PostgreSQL text cannot hold NUL
        raise invalid_body("name must not contain NUL characters.")
    return clean


# The one accepted spelling of an id on every surface: the canonical 8-4-4-4-12 hex form (either case);
# no braces, no `urn:uuid:`, no dash-less form. openapi.yaml and mcp_tools.json carry the same pattern.
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_CANONICAL_UUID = re.compile(UUID_PATTERN)


def canonical_uuid(value: object) -> uuid.UUID | None:
    """The UUID spelled canonically in `value`, else None."""
    if not isinstance(value, str) or not _CANONICAL_UUID.fullmatch(value):
        return None
    return uuid.UUID(value)


def parse_uuid(value: str) -> uuid.UUID:
    """A path UUID in canonical form, or 400 invalid_id."""
    parsed = canonical_uuid(value)
    if parsed is None:
        raise invalid_id(repr(str(value)[:100]))
    return parsed


def parse_uuid_list(values: list[str], name: str) -> list[uuid.UUID]:
    """The distinct UUIDs of a body list, in order, or 400 invalid_body naming the field."""
    parsed = [canonical_uuid(v) for v in values]
    if any(p is None for p in parsed):
        raise invalid_body(f"{name} must be UUIDs.")
    return list(dict.fromkeys(p for p in parsed if p is not None))


def parse_uuid_field(value: str | None, name: str) -> uuid.UUID | None:
    """An optional UUID from a query parameter or body field, or 400 invalid_body naming it."""
    if value is None:
        return None
    parsed = canonical_uuid(value)
    if parsed is None:
        raise invalid_body(f"{name} must be a UUID in canonical form.")
    return parsed
