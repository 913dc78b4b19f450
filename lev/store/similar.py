"""Similar items: the visible items whose chunks lie nearest an item's chunks (search's scope rules and scan
choice, `store.search.plan_scope`)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.items import visible
from lev.store.models import user_items
from lev.store.scope import Scope
from lev.store.scoped_sql import item_sql
from lev.store.search import SearchParams, plan_scope

# Similar items: for each of the item's first :src chunks, its :depth nearest visible chunks of other contents;
# a content scores the best cosine any of its chunks reached. Contents with the item's own text (pasted twice)
# count as duplicates and are left out, as is the item's own content (other items of the same URL).
_SIMILAR_SQL = """
WITH src AS MATERIALIZED (
  SELECT embedding FROM chunks WHERE content_id = :cid ORDER BY ord LIMIT :src
), nn AS (
  SELECT n.content_id, max(n.cos) AS sim
    FROM src CROSS JOIN LATERAL (
      SELECT c.content_id, 1 - (c.embedding <=> src.embedding) AS cos
        FROM chunks c
       WHERE c.content_id <> :cid AND {filter}
       ORDER BY (c.embedding <=> src.embedding) {exact}
       LIMIT :depth
    ) n
   GROUP BY n.content_id
)
SELECT v.item_id, v.item_title, v.item_url, v.item_kind, c.sim
  FROM nn c
  JOIN contents ct ON ct.id = c.content_id
 CROSS JOIN LATERAL ({item}) v
 WHERE ct.text IS NULL OR ct.text IS DISTINCT FROM (SELECT text FROM contents WHERE id = :cid)
 ORDER BY c.sim DESC, v.item_id
 LIMIT :limit
"""

SIMILAR_SOURCE_CHUNKS = 16


async def similar_items(session: AsyncSession, scope: Scope, item_id: uuid.UUID, *, limit: int,
                        params: SearchParams) -> list[dict[str, Any]] | None:
    """The visible items whose chunks lie nearest the chunks of `item_id`; None unless it is visible."""
    content_id = (await session.execute(
        select(user_items.c.content_id).where(user_items.c.id == item_id, visible(scope))
    )).scalar_one_or_none()
    if content_id is None:
        return None
    p = params
    depth = max(4 * limit, 40)
    # one iterative walk per source chunk, without search's exact fallback (sixteen exact scans of a large scope
    # would cost more than the walks)
    plan = await plan_scope(session, scope, None, depth, "semantic", p)
    item = item_sql(scope, None)
    rows = (await session.execute(
        text(_SIMILAR_SQL.format(filter=plan.vec_filter, exact=plan.exact, item=item.sql)),
        {"cid": content_id, "src": SIMILAR_SOURCE_CHUNKS, "depth": depth, "limit": limit,
         **plan.bound(item)},
    )).all()
    return [{"item_id": str(r.item_id), "title": r.item_title, "url": r.item_url, "kind": r.item_kind,
             "similarity": float(r.sim)} for r in rows]
