"""A fair share of outbound fetches per user (feed checks, follows, OPML imports, page fetches and downloads): at
most PER_USER of one user's fetches hold a connection at once, out of TOTAL for the process (the shared guarded
client's pool is as large, so no fetch queues anywhere but here), so one user's slow-dripping hosts never starve
another user's fetch. Whose fetch it is comes from the task's context (`on_behalf_of`); a fetch of no user's (a
client metadata document) takes only a place of the total."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar

TOTAL = 32  # as many as the feed checks' shared client holds (lev.feeds.parse.CONNECTIONS)
PER_USER = 4

_acting: ContextVar[uuid.UUID | None] = ContextVar("lev_outbound_user", default=None)


class _Gates:
    def __init__(self) -> None:
        self.total = asyncio.Semaphore(TOTAL)
        self.users: dict[uuid.UUID, tuple[asyncio.Semaphore, list[int]]] = {}  # the gate and how many use it


_gates: dict[int, _Gates] = {}


@contextlib.contextmanager
def on_behalf_of(user_id: uuid.UUID) -> Iterator[None]:
    """Count the outbound fetches of this block (and of the tasks it starts) as `user_id`'s."""
    token = _acting.set(user_id)
    try:
        yield
    finally:
        _acting.reset(token)


@contextlib.asynccontextmanager
async def slot() -> AsyncIterator[None]:
    """Hold a place for one fetch: the user's (at most PER_USER at once), then one of the process's TOTAL."""
    loop_id = id(asyncio.get_running_loop())
    gates = _gates.get(loop_id)
    if gates is None:
        gates = _gates[loop_id] = _Gates()
    user = _acting.get()
    if user is None:
        async with gates.total:
            yield
        return
    gate, users = gates.users.setdefault(user, (asyncio.Semaphore(PER_USER), [0]))
    users[0] += 1
    try:
        async with gate, gates.total:
            yield
    finally:
        users[0] -= 1
        if not users[0]:
            gates.users.pop(user, None)
