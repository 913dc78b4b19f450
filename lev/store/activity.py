"""Activity log queries: write batches, read a user's entries, clear them, purge old ones."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store import tokens as token_store
from lev.store.models import activity


async def list_for_user(
    session: AsyncSession, user_id: uuid.UUID, *, token_id: uuid.UUID | None, surface: str | None,
    page: int, per_page: int,
) -> tuple[list[dict[str, Any]], int]:
    conds = [activity.c.user_id == user_id]
    if token_id is not None:
        conds.append(activity.c.token_id == token_id)
    if surface is not None:
        conds.append(activity.c.surface == surface)
    total = int((await session.execute(select(func.count()).select_from(activity).where(*conds))).scalar_one())
    rows = await session.execute(
        select(activity).where(*conds).order_by(activity.c.ts.desc(), activity.c.id.desc())
        .limit(per_page).offset((page - 1) * per_page)
    )
    out = []
    for r in rows:
        m = r._mapping
        out.append({
            "id": m["id"], "ts": m["ts"].isoformat(), "token_id": str(m["token_id"]) if m["token_id"] else None,
            "surface": m["surface"], "method": m["method"], "status": m["status"], "ip": m["ip"],
            "user_agent": m["user_agent"], "result_count": m["result_count"], "latency_ms": m["latency_ms"],
            "query": m["query"], "request_id": m["request_id"],
        })
    return out, total


async def write_batch(session: AsyncSession, batch: list[dict[str, Any]]) -> None:
    """Insert activity entries and move each token's last_used_at to its newest entry (once per token)."""
    seen: dict[uuid.UUID, datetime] = {}
    for e in batch:
        tid = e.get("token_id")
        if tid is not None and (tid not in seen or seen[tid] < e["ts"]):
            seen[tid] = e["ts"]
    await session.execute(insert(activity), batch)
    if seen:
        await token_store.touch_last_used(session, seen)


async def clear_for_user(session: AsyncSession, user_id: uuid.UUID) -> int:
    res = await session.execute(delete(activity).where(activity.c.user_id == user_id))
    return int(res.rowcount)  # type: ignore[attr-defined]


async def purge_before(session: AsyncSession, cutoff: datetime) -> int:
    res = await session.execute(delete(activity).where(activity.c.ts < cutoff))
    return int(res.rowcount)  # type: ignore[attr-defined]
