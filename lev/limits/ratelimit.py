"""Per-token rate limits (moving window on Redis, shared by every process) and the monthly write cap.

Each REST operation declares its class in `openapi.yaml` (`x-lev-limit`); MCP tools declare theirs in
`mcp_tools.json`. This module is the only place that enforces them.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from limits import RateLimitItem, parse
from limits.aio.storage import RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError
from redis.exceptions import RedisError

from lev.core import clock, context
from lev.core.errors import ApiError, rate_limited
from lev.core.settings import Settings
from lev.limits.attempts import AttemptBudget, Reservation, reserve_all, window_text
from lev.ops import logs, metrics
from lev.store import tokens as token_store
from lev.store.db import Database

log = logs.get_logger("lev.limits.ratelimit")

WRITE_CLASSES = frozenset({"ingest", "delete", "bulk", "mcp_write"})


UNCAPPED = 2**31 - 1  # the count a token without a write cap can never reach
PREFIX = RedisStorage.PREFIX  # the moving windows' keys, as `limits` names them (its status reads share them)

# `limits`' two moving-window scripts (acquire_moving_window.lua with amount 1, then moving_window.lua) in one: an
# entry taken when the window has room, and the window's oldest entry and count, in one round trip instead of two.
# The same keys and entries as `limits` writes and reads.
HIT_AND_COUNT = """
local timestamp, limit, expiry = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local acquired = 0
local entry = redis.call('lindex', KEYS[1], limit - 1)
if not (entry and tonumber(entry) >= timestamp - expiry) then
    redis.call('lpush', KEYS[1], timestamp)
    redis.call('ltrim', KEYS[1], 0, limit - 1)
    redis.call('expire', KEYS[1], expiry)
    acquired = 1
end
local target, low, high, found = timestamp - expiry, 0, limit - 1, nil
while low <= high do
    local mid = math.floor((low + high) / 2)
    local val = tonumber(redis.call('lindex', KEYS[1], mid))
    if val and val >= target then
        found = mid
        low = mid + 1
    else
        high = mid - 1
    end
end
if found then
    return {acquired, tostring(redis.call('lindex', KEYS[1], found)), found + 1}
end
return {acquired, false, 0}
"""


@dataclass(frozen=True)
class Window:
    """One call counted (or refused) against a moving window: whether it fit, and the window after it."""

    allowed: bool
    reset: float  # epoch seconds at which the oldest entry leaves the window
    remaining: int


def window_of(reply: Any, item: RateLimitItem, now: float) -> Window:
    """HIT_AND_COUNT's reply as `Window` (what `limits`' hit and get_window_stats together answer)."""
    acquired, oldest, count = reply
    start = float(oldest) if oldest else now
    return Window(bool(acquired), start + item.get_expiry(), item.amount - int(count))


class Caller(Protocol):
    """What the limits read of who is calling (`lev.auth.policy.Principal`): its token (None for a browser
    session, whose writes count against its user's hourly budgets), its user, its monthly write cap (0: none) and
    its capabilities."""

    @property
    def token_id(self) -> uuid.UUID | None: ...

    @property
    def user_id(self) -> uuid.UUID: ...

    @property
    def write_cap(self) -> int: ...

    @property
    def capabilities(self) -> frozenset[str]: ...


class Limiter:
    """Checks a token against its class's hourly limit and, for writes, its monthly write cap."""
    def __init__(self, settings: Settings, redis_url: str, redis: Any, db: Database) -> None:
        self.settings = settings
        self.db = db
        uri = redis_url.replace("unix://", "async+redis+unix://", 1) if redis_url.startswith("unix://") \
            else "async+" + redis_url
        self.storage = RedisStorage(uri, implementation="redispy", socket_connect_timeout=1, socket_timeout=2)
        self.strategy = MovingWindowRateLimiter(self.storage)
        self.items: dict[str, RateLimitItem] = {
            "read": parse(settings.limit_read),
            "ingest": parse(settings.limit_ingest),
            "delete": parse(settings.limit_delete),
            "bulk": parse(settings.limit_bulk),
            "mcp_write": parse(settings.limit_mcp_write),
        }
        self.sign_in = {
            "email": AttemptBudget(redis, "sign_in_email", parse(settings.limit_sign_in_email),
                                   "Too many failed sign-ins for this account; try again in {retry} s."),
            "ip": AttemptBudget(redis, "sign_in_ip", parse(settings.limit_sign_in_ip),
                                "Too many failed sign-ins from this address; try again in {retry} s."),
        }
        self.sign_up = AttemptBudget(redis, "sign_up_ip", parse(settings.limit_sign_up_ip),
                                     "Too many sign-ups from this address ({amount} per {window}); try again in "
                                     "{retry} s.")
        self.registration_item = parse(settings.limit_client_registration_ip)
        self.public_page_item = parse(settings.limit_public_page)
        self._redis = redis
        self._hit_script = redis.register_script(HIT_AND_COUNT)

    async def apply(self, principal: Caller, limit_class: str | None, rider: HourlyRider | None = None) -> None:
        """`check`, then hand the RateLimit-* headers to the response of the current request. `rider` may hold the
        hourly window already counted for this caller (in the auth epoch's round trip)."""
        try:
            headers = await self.check(principal, limit_class, rider)
        except ApiError as err:
            if err.code == "rate_limited":
                metrics.count_refusal(str(err.extra.get("limit") or limit_class))
            raise
        info = context.current()
        if info is not None:
            info.headers.update(headers)

    async def check(self, principal: Caller, limit_class: str | None, rider: HourlyRider | None = None
                    ) -> dict[str, str]:
        """Consume one call; returns the RateLimit-* headers, or raises 429 rate_limited. A browser session (no
        token) has its user's hourly write budgets (the same classes, keyed by the user) and no monthly cap."""
        if not limit_class:
            return {}
        if principal.token_id is None:
            if limit_class not in WRITE_CLASSES or not self.settings.limits_on:
                return {}
            return await self._check_hourly(principal, limit_class, rider)
        headers: dict[str, str] = {}
        if self.settings.limits_on:
            headers = await self._check_hourly(principal, limit_class, rider)
        if limit_class in WRITE_CLASSES and principal.token_id is not None:
            await self._count_write(principal, headers)
        return headers

    async def status(self, principal: Caller) -> dict[str, Any]:
        """What the token has left, without consuming anything: monthly writes and the hourly budgets of the
        classes its capabilities reach (None when the hourly limits are off or Redis cannot be asked)."""
        used: int | None = (await self.writes_this_month([str(principal.token_id)]))[str(principal.token_id)]
        cap = principal.write_cap or None
        writes = {"used": used, "cap": cap,
                  "remaining": None if cap is None or used is None else max(0, cap - used),
                  "resets_in_sec": clock.seconds_to_month_end()}
        return {"monthly_writes": writes, "hourly": await self._hourly_status(principal)}

    async def _hourly_status(self, principal: Caller) -> dict[str, Any] | None:
        if not self.settings.limits_on:
            return None
        classes = ["read"] + (sorted(WRITE_CLASSES) if "write" in principal.capabilities else [])
        out: dict[str, Any] = {}
        try:
            for cls in classes:
                item = self.items[cls]
                stats = await self.strategy.get_window_stats(item, cls, str(principal.token_id))
                out[cls] = {"limit": item.amount, "window": window_text(item), "remaining": stats.remaining,
                            "resets_in_sec": max(0, math.ceil(stats.reset_time - time.time()))}
        except (RedisError, OSError, StorageError):
            return None
        return out

    def hourly_key(self, principal: Caller, limit_class: str | None) -> str | None:
        """The Redis key of the hourly window this call of `limit_class` counts against (None: none applies)."""
        if not limit_class or not self.settings.limits_on or (
                principal.token_id is None and limit_class not in WRITE_CLASSES):
            return None
        key = str(principal.token_id) if principal.token_id is not None else f"user:{principal.user_id}"
        return f"{PREFIX}:{self.items[limit_class].key_for(limit_class, key)}"

    def hit_command(self, key: str, item: RateLimitItem, now: float) -> tuple[Any, ...]:
        """HIT_AND_COUNT as an EVALSHA command's arguments (for a pipeline that carries other commands)."""
        return ("EVALSHA", self._hit_script.sha, 1, key, now, item.amount, item.get_expiry())

    async def _hit(self, item: RateLimitItem, *identifiers: str) -> Window:
        """One call counted against `item`'s moving window of `identifiers`, in one round trip."""
        now = time.time()
        key = f"{PREFIX}:{item.key_for(*identifiers)}"
        return window_of(await self._hit_script([key], [now, item.amount, item.get_expiry()]), item, now)

    async def _check_hourly(self, principal: Caller, limit_class: str, rider: HourlyRider | None = None
                            ) -> dict[str, str]:
        item = self.items[limit_class]
        key = str(principal.token_id) if principal.token_id is not None else f"user:{principal.user_id}"
        holder = "token" if principal.token_id is not None else "account's browser sessions"
        window = rider.window_for(self.hourly_key(principal, limit_class)) if rider is not None else None
        try:
            stats = window or await self._hit(item, limit_class, key)
        except (RedisError, OSError, StorageError) as exc:
            # Redis down: the hourly limits fail open (docs/operations.md); the monthly write cap still holds.
            log.warning("rate limiter unavailable; serving without the hourly limit", error=type(exc).__name__)
            return {}
        allowed = stats.allowed
        reset = max(0, math.ceil(stats.reset - time.time()))
        headers = {"RateLimit-Limit": str(item.amount), "RateLimit-Remaining": str(stats.remaining),
                   "RateLimit-Reset": str(reset)}
        if not allowed:
            retry = max(1, reset)
            raise rate_limited(f"Rate limit of {item.amount} calls per {window_text(item)} for this {holder} is used "
                               f"up; retry in {retry} s.", {**headers, "Retry-After": str(retry)},
                               retry_after_sec=retry)
        return headers

    async def _count_write(self, principal: Caller, headers: dict[str, str]) -> None:
        # In PostgreSQL, beside the data it guards: a crash of Redis (or of everything) cannot reset it.
        assert principal.token_id is not None  # browser sessions have no write cap
        # uncapped tokens are counted too (never refused), so GET /api/v1/token can say what they wrote
        cap = principal.write_cap if principal.write_cap > 0 else UNCAPPED
        async with self.db.driver() as conn:  # one atomic statement: no BEGIN and COMMIT round trips
            counted = await token_store.count_write(conn, principal.token_id, clock.month_key(), cap)
        if not counted:
            retry = clock.seconds_to_month_end()
            raise rate_limited(f"This token's monthly write cap of {principal.write_cap} is used up; it resets when "
                               f"the month rolls over, in {retry} s.", {**headers, "Retry-After": str(retry)},
                               retry_after_sec=retry, limit="monthly_writes")

    async def reserve_sign_in(self, email: str, ip: str | None) -> list[Reservation]:
        """Reserve one sign-in attempt of the email and of the source address before the password is checked (429
        rate_limited when either budget of failures is used up); release the reservations when it succeeds, so only
        failures count. Reserving first makes the budget hold for a parallel burst too."""
        return await reserve_all([(self.sign_in["email"], email.strip().lower()), (self.sign_in["ip"], ip or "-")])

    async def check_sign_up(self, ip: str | None) -> None:
        """Count one sign-up attempt of the source address, whatever its outcome; 429 rate_limited past the budget."""
        await self.sign_up.reserve(ip or "-")

    async def check_client_registration(self, ip: str | None) -> None:
        """Consume one OAuth client registration of the source address; 429 rate_limited when its budget is used
        up. Like the hourly limits, it fails open while Redis is down."""
        item, key = self.registration_item, ip or "-"
        try:
            stats = await self._hit(item, "client_registration", key)
        except (RedisError, OSError, StorageError) as exc:
            log.warning("rate limiter unavailable; registering without the per-address limit",
                        error=type(exc).__name__)
            return
        if not stats.allowed:
            retry = max(1, math.ceil(stats.reset - time.time()))
            raise rate_limited(f"Too many client registrations from this address ({item.amount} per "
                               f"{window_text(item)}); try again in {retry} s.", {"Retry-After": str(retry)},
                               retry_after_sec=retry, limit="client_registration_ip")

    async def check_public_page(self, slug: str, visitor: str | None) -> None:
        """Consume one view of a published folder (page or feed) by one visitor address; 429 rate_limited past that
        visitor's budget (another visitor's views are their own). Fails open while Redis is down, like the hourly
        limits."""
        item = self.public_page_item
        try:
            stats = await self._hit(item, "public_page", slug, visitor or "unknown")
        except (RedisError, OSError, StorageError) as exc:
            log.warning("rate limiter unavailable; serving a public page without its limit", error=type(exc).__name__)
            return
        if not stats.allowed:
            retry = max(1, math.ceil(stats.reset - time.time()))
            raise rate_limited(f"This public page is asked for too often from your address ({item.amount} per "
                               f"{window_text(item)}); "
                               f"try again in {retry} s.", {"Retry-After": str(retry)}, retry_after_sec=retry,
                               limit="public_page")

    async def writes_this_month(self, token_ids: list[str]) -> dict[str, int]:
        """Writes counted against each token's monthly cap so far."""
        if not token_ids:
            return {}

        async with self.db.transaction() as s:
            counted = await token_store.writes_in_month(s, [uuid.UUID(t) for t in token_ids], clock.month_key())
        return {t: counted.get(uuid.UUID(t), 0) for t in token_ids}


class HourlyRider:
    """A request's hourly window counted in the same Redis round trip as the auth epoch's read (the principal
    cache's `Rider`): `queue` adds the count for the cached caller to that pipeline, `take` keeps its reply, and
    `Limiter.check` uses it when the caller it was counted for is the one authenticated."""

    def __init__(self, limiter: Limiter, limit_class: str | None) -> None:
        self.limiter, self.limit_class = limiter, limit_class
        self._key: str | None = None
        self._window: Window | None = None

    def queue(self, pipe: Any, principal: Caller) -> bool:
        key = self.limiter.hourly_key(principal, self.limit_class)
        if key is None or self.limit_class is None:
            return False
        self._key, self._now = key, time.time()
        pipe.execute_command(*self.limiter.hit_command(key, self.limiter.items[self.limit_class], self._now))
        return True

    def take(self, reply: Any) -> None:
        """The pipeline's reply to `queue`'s command; an error (a script Redis has not loaded) leaves the count
        to `Limiter.check`."""
        if self._key is None or self.limit_class is None or isinstance(reply, Exception):
            self._key = None
            return
        self._window = window_of(reply, self.limiter.items[self.limit_class], self._now)

    def window_for(self, key: str | None) -> Window | None:
        """The window counted for `key`, if this rider counted it (else the call is counted by the caller)."""
        return self._window if key is not None and key == self._key else None
