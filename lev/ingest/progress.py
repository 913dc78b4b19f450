"""How far the worker is with a content (`progress` on GET /api/v1/items/{id} while it is processing).

Kept in Redis with a one-hour expiry: a figure for people and agents watching, not state anyone relies on
(the database says whether an item is ready).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from lev.plumbing.ports import Redis

_KEY = "lev:progress:{}"
TTL_SEC = 3600


async def report(redis: Redis, content_id: uuid.UUID, stage: str, done: int, total: int | None) -> None:
    """Record that `done` of `total` units of `stage` (`embedding`: chunks) are finished."""
    value = json.dumps({"stage": stage, "done": done, "total": total})
    await redis.set(_KEY.format(content_id), value, ex=TTL_SEC)


async def clear(redis: Redis, content_id: uuid.UUID) -> None:
    await redis.delete(_KEY.format(content_id))


async def read(redis: Redis, content_id: uuid.UUID) -> dict[str, Any]:
    """The last figure reported for a content still processing; `queued` before the worker starts on it."""
    raw = await redis.get(_KEY.format(content_id))
    if raw is None:
        return {"stage": "queued", "done": 0, "total": None}
    out: dict[str, Any] = json.loads(raw)
    return out
