"""The principal cache: what `lev.auth.policy.authenticate` returned for a bearer token, kept in the process so that
a request skips the database checkout and the token lookup, yet revocation stays immediate everywhere.

Every use of a cached principal first reads one Redis key, the auth epoch (a random value). Every change to what
a credential authenticates as (a token or OAuth grant revoked, an OAuth access token rotated, a password changed,
a folder deleted, a tier changed, a restore; `changing_auth`, `invalidate`, `announce_change`) writes a new epoch
after its transaction commits, so the next request in every process sees a different epoch and goes back to the
database. An entry also ends at the credential's own
expiry (`Principal.expires_at`) and after `LEV_PRINCIPAL_CACHE_SEC` at the latest. When Redis cannot be read, the
cache is emptied and not used (fail safe: the database decides, as without a cache).

Keys are SHA-256 digests of the credential (with the audience it was presented to), never the credential.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal, authenticate
from lev.ops import logs, metrics
from lev.store.db import Database

log = logs.get_logger("lev.auth.principal_cache")

EPOCH_KEY = "lev:auth:epoch"
MAX_ENTRIES = 10_000


class Rider(Protocol):
    """Commands sent in the same round trip as the epoch's read when the credential's principal is cached (the
    request's hourly rate limit, `lev.limits.ratelimit.HourlyRider`): `queue` adds them to the pipeline for that
    principal (False: none), `take` is handed their reply."""

    def queue(self, pipe: Any, principal: Any) -> bool: ...

    def take(self, reply: Any) -> None: ...


@dataclass(frozen=True)
class _Entry:
    principal: Principal
    epoch: bytes
    until: float  # time.monotonic() deadline (the cache's own bound)


class PrincipalCache:
    """Credential digest -> Principal, valid while the auth epoch in Redis is the one it was read under."""

    def __init__(self, redis: Any, ttl_sec: float, max_entries: int = MAX_ENTRIES) -> None:
        self._redis = redis
        self.ttl_sec = ttl_sec
        self.max_entries = max_entries
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.ttl_sec > 0

    def clear(self) -> None:
        self._entries.clear()

    async def _epoch(self) -> bytes | None:
        """The current auth epoch; None when Redis cannot say (then nothing is cached or served from cache)."""
        try:
            epoch = await self._redis.get(EPOCH_KEY)
            if epoch is None:  # first use, or Redis lost its data: a fresh epoch no entry can carry
                await self._redis.set(EPOCH_KEY, secrets.token_hex(16), nx=True)
                epoch = await self._redis.get(EPOCH_KEY)
                if epoch is None:
                    return None
        except (RedisError, OSError) as exc:
            if self._entries:
                log.warning("auth epoch unreadable; principal cache emptied", error=type(exc).__name__)
            self.clear()
            return None
        return bytes(epoch)

    async def _epoch_with(self, rider: Rider, principal: Principal) -> bytes | None:
        """The epoch, read in one round trip with `rider`'s commands for `principal`."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.get(EPOCH_KEY)
        if not rider.queue(pipe, principal):
            return await self._epoch()
        try:
            epoch, reply = await pipe.execute(raise_on_error=False)
        except (RedisError, OSError):
            return await self._epoch()  # which empties the cache, as Redis cannot be read
        rider.take(reply)
        if epoch is None or isinstance(epoch, Exception):
            return await self._epoch()
        return bytes(epoch)

    async def resolve(self, credential: str, load: Callable[[], Awaitable[Principal]],
                      audience: str | None = None, rider: Rider | None = None) -> Principal:
        """The principal of `credential` at `audience` (the resource addressed; an OAuth grant is valid only at
        its own): from the cache when its entry is still valid, else `load()` (which raises for a bad credential;
        failures are never cached). With `rider`, its commands for a cached principal share the epoch's round
        trip."""
        if not self.enabled:
            return await load()
        key = hashlib.sha256(f"{audience or ''}\n{credential}".encode()).digest()
        entry = self._entries.get(key)
        # the epoch is read before the database: a change committed after this read is seen next time
        epoch = (await self._epoch_with(rider, entry.principal) if rider is not None and entry is not None
                 and _valid(entry) else await self._epoch())
        entry = self._entries.get(key)
        if entry is not None and epoch is not None and entry.epoch == epoch and _valid(entry):
            self.hits += 1
            metrics.count_principal("hit")
            return entry.principal
        if entry is not None:
            self._entries.pop(key, None)
        self.misses += 1
        metrics.count_principal("miss")
        principal = await load()
        if epoch is not None:
            self._entries[key] = _Entry(principal, epoch, time.monotonic() + self.ttl_sec)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return principal

    async def invalidate(self) -> None:
        """A credential's meaning changed (after its commit): drop every process's entries."""
        self.clear()
        await announce(self._redis)


def _valid(entry: _Entry) -> bool:
    if time.monotonic() >= entry.until:
        return False
    expires = entry.principal.expires_at
    return expires is None or expires > datetime.now(UTC)


async def announce(redis: Any) -> None:
    """Write a new auth epoch: every cached principal in every process is read again from the database."""
    try:
        await redis.set(EPOCH_KEY, secrets.token_hex(16))
    except (RedisError, OSError) as exc:
        # The change is committed; processes that cannot read Redis do not use their caches, and any entry lives
        # at most LEV_PRINCIPAL_CACHE_SEC.
        log.error("could not announce an auth change through Redis; cached principals end within "
                  "LEV_PRINCIPAL_CACHE_SEC", error=type(exc).__name__)


async def announce_change(redis_url: str) -> None:
    """`announce` from a process without a runtime (the CLI)."""
    redis = Redis.from_url(redis_url, socket_connect_timeout=2, socket_timeout=2)
    try:
        await announce(redis)
    finally:
        await redis.aclose()


_cache: PrincipalCache | None = None


def install(cache: PrincipalCache | None) -> None:
    """Set (or clear) the process's cache; `lev.runtime` does it when it starts and stops."""
    global _cache
    _cache = cache


def current() -> PrincipalCache | None:
    return _cache


async def invalidate() -> None:
    """After a committed change to what a credential authenticates as: drop every process's cached principals."""
    if _cache is not None:
        await _cache.invalidate()


async def authenticate_bearer(db: Database, token: str, audience: str | None = None,
                              rider: Rider | None = None) -> Principal:
    """`lev.auth.policy.authenticate` for a bearer token (at `audience`: see there), through the process's cache when
    there is one (with `rider`'s commands in the epoch's round trip)."""
    async def load() -> Principal:
        async with db.read_session() as s:
            return await authenticate(s, token, audience=audience)

    return await (_cache.resolve(token, load, audience, rider) if _cache is not None else load())


@asynccontextmanager
async def changing_auth(db: Database) -> AsyncIterator[AsyncSession]:
    """A transaction that may revoke or change credentials (token revoke, password change, folder delete, tier
    change): when it commits, every process's cached principals are dropped (`invalidate`)."""
    async with db.transaction() as s:
        yield s
    await invalidate()
