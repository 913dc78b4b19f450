"""Search over chunks: semantic (pgvector HNSW), keyword (BM25 in SQL) and hybrid (normalised linear blend).

The caller's scope (user, folders, kb_only) and `in_kb` are applied inside the SQL, before any limit.
Keyword scoring is BM25 over the postings kept by migration 0002; bench/LAB_NOTES.md explains the
choices and bench/RESULTS.md has the measurements behind the default parameters.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import exists, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncSession

from lev.policy import Scope
from store.items import visible
from store.models import chunks, item_folders, user_items

MODES = ("hybrid", "semantic", "keyword")


@dataclass(frozen=True)
class SearchParams:
    candidates: int = 100
    semantic_weight: float = 0.6
    k1: float = 1.2
    b: float = 0.6
    prune_df: float = 0.03
    keep_rarest: int = 3
    ef_search: int = 40
    exact_scan_max_chunks: int = 5000  # below this many visible chunks, scan exactly instead of HNSW


_KEYWORD_SQL = """
WITH q AS MATERIALIZED (
  SELECT * FROM lev_bm25_query(:q, :k1, :b, :prune, :keep)
), cand AS (
  SELECT p.chunk_id
    FROM q JOIN lev_postings p ON p.lexeme = q.lexeme
   WHERE q.sel AND p.content_id IN ({scope})
   GROUP BY p.chunk_id
   ORDER BY sum(q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl)) DESC
   LIMIT :depth
)
SELECT cand.chunk_id,
       (SELECT sum(q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl))
          FROM q JOIN lev_postings p ON p.lexeme = q.lexeme AND p.chunk_id = cand.chunk_id) AS score
  FROM cand
 ORDER BY score DESC, cand.chunk_id
 LIMIT :limit
"""

_SEMANTIC_SQL = """
SELECT c.id AS chunk_id, 1 - (c.embedding <=> CAST(:qvec AS vector)) AS score
  FROM chunks c
 WHERE c.content_id IN ({scope})
 ORDER BY (c.embedding <=> CAST(:qvec AS vector)) {exact}
 LIMIT :limit
"""

# Candidates: top-depth BM25 (pruned posting lists) and top-depth nearest neighbours; both scores are then
# computed exactly for every candidate, min-max normalised over the union, and blended with weight w on cosine.
_HYBRID_SQL = """
WITH q AS MATERIALIZED (
  SELECT * FROM lev_bm25_query(:q, :k1, :b, :prune, :keep)
), kw AS (
  SELECT p.chunk_id
    FROM q JOIN lev_postings p ON p.lexeme = q.lexeme
   WHERE q.sel AND p.content_id IN ({scope})
   GROUP BY p.chunk_id
   ORDER BY sum(q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl)) DESC
   LIMIT :depth
), vec AS (
  SELECT c.id AS chunk_id
    FROM chunks c
   WHERE c.content_id IN ({scope})
   ORDER BY (c.embedding <=> CAST(:qvec AS vector)) {exact}
   LIMIT :depth
), cand AS MATERIALIZED (
  SELECT chunk_id FROM kw UNION SELECT chunk_id FROM vec
), scored AS MATERIALIZED (
  SELECT c.id AS chunk_id,
         1 - (c.embedding <=> CAST(:qvec AS vector)) AS cos,
         (SELECT sum(q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl))
            FROM q JOIN lev_postings p ON p.lexeme = q.lexeme AND p.chunk_id = c.id) AS bm25
    FROM cand JOIN chunks c ON c.id = cand.chunk_id
), norm AS (
  SELECT *, min(cos) OVER () AS cmin, max(cos) OVER () AS cmax,
            min(coalesce(bm25, 0)) OVER () AS bmin, max(coalesce(bm25, 0)) OVER () AS bmax
    FROM scored
)
SELECT chunk_id, cos, bm25,
       :w * coalesce((cos - cmin) / nullif(cmax - cmin, 0), 0)
     + (1 - :w) * coalesce((coalesce(bm25, 0) - bmin) / nullif(bmax - bmin, 0), 0) AS score
  FROM norm
 ORDER BY score DESC, chunk_id
 LIMIT :limit
"""


def _visible_contents(scope: Scope, folder_id: uuid.UUID | None, chunk_ids: list[uuid.UUID]) -> Any:
    """For each content of the given chunks, the newest visible item holding it (title and URL for results)."""
    q = (
        select(user_items.c.content_id, user_items.c.id.label("item_id"), user_items.c.title.label("item_title"),
               user_items.c.url.label("item_url"))
        .where(visible(scope), user_items.c.in_kb.is_(True), user_items.c.status == "ready",
               user_items.c.content_id.in_(select(chunks.c.content_id).where(chunks.c.id.in_(chunk_ids))))
        .distinct(user_items.c.content_id)
        .order_by(user_items.c.content_id, user_items.c.created_at.desc())
    )
    if folder_id is not None:
        q = q.where(exists().where(item_folders.c.item_id == user_items.c.id, item_folders.c.folder_id == folder_id))
    return q


def _scope_sql(scope: Scope, folder_id: uuid.UUID | None) -> str:
    """The visible-content subquery as SQL text (only UUIDs and booleans are inlined, rendered by SQLAlchemy)."""
    q = select(user_items.c.content_id).where(visible(scope), user_items.c.in_kb.is_(True),
                                              user_items.c.status == "ready")
    if folder_id is not None:
        q = q.where(exists().where(item_folders.c.item_id == user_items.c.id, item_folders.c.folder_id == folder_id))
    return str(q.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))


_ESTIMATES: dict[tuple[Scope, uuid.UUID | None], tuple[float, int]] = {}
_ESTIMATE_TTL = 30.0


async def _visible_chunks(session: AsyncSession, scope: Scope, folder_id: uuid.UUID | None) -> tuple[int, int]:
    """(estimated visible chunks, estimated total chunks), cached briefly: only used to pick a scan strategy."""
    total = int((await session.execute(text(
        "SELECT greatest(n_chunks, 1) FROM lev_bm25_stats"))).scalar_one())
    key = (scope, folder_id)
    hit = _ESTIMATES.get(key)
    if hit and time.monotonic() - hit[0] < _ESTIMATE_TTL:
        return hit[1], total
    n = int((await session.execute(text(
        f"SELECT count(*) FROM chunks c WHERE c.content_id IN ({_scope_sql(scope, folder_id)})"))).scalar_one())
    if len(_ESTIMATES) > 10_000:
        _ESTIMATES.clear()
    _ESTIMATES[key] = (time.monotonic(), n)
    return n, total


async def _plan_vector_scan(session: AsyncSession, scope: Scope, folder_id: uuid.UUID | None, depth: int,
                            p: SearchParams) -> str:
    """Exact scan for small scopes; otherwise HNSW with ef_search raised for the scope's selectivity.

    pgvector filters after the index scan, so a selective scope needs a larger candidate pool.
    """
    visible_n, total = await _visible_chunks(session, scope, folder_id)
    if visible_n <= p.exact_scan_max_chunks:
        return "+ 0"
    ef = min(1000, max(p.ef_search, depth, math.ceil(1.5 * depth * total / max(visible_n, 1))))
    await session.execute(text(f"SET LOCAL hnsw.ef_search = {int(ef)}"))
    return ""


async def search(
    session: AsyncSession, scope: Scope, *, query: str, query_vector: list[float] | None, mode: str, limit: int,
    folder_id: uuid.UUID | None = None, params: SearchParams | None = None,
) -> list[dict[str, Any]]:
    """Top `limit` chunks visible to `scope` for `query`, as result objects (DESIGN.md §4)."""
    p = params or SearchParams()
    depth = max(p.candidates, limit)
    scope_sql = _scope_sql(scope, folder_id)
    qvec = None if query_vector is None else str(np.asarray(query_vector, dtype=np.float32).tolist())
    bm25 = {"q": query, "k1": p.k1, "b": p.b, "prune": p.prune_df, "keep": p.keep_rarest}
    sem: dict[uuid.UUID, float] = {}
    kw: dict[uuid.UUID, float] = {}
    if mode == "keyword":
        rows = (await session.execute(text(_KEYWORD_SQL.format(scope=scope_sql)),
                                      {**bm25, "depth": depth, "limit": limit})).all()
        ranked = [(r.chunk_id, float(r.score)) for r in rows]
        kw = dict(ranked)
    elif mode == "semantic":
        exact = await _plan_vector_scan(session, scope, folder_id, limit, p)
        rows = (await session.execute(text(_SEMANTIC_SQL.format(scope=scope_sql, exact=exact)),
                                      {"qvec": qvec, "limit": limit})).all()
        ranked = [(r.chunk_id, float(r.score)) for r in rows]
        sem = dict(ranked)
    else:
        exact = await _plan_vector_scan(session, scope, folder_id, depth, p)
        rows = (await session.execute(text(_HYBRID_SQL.format(scope=scope_sql, exact=exact)),
                                      {**bm25, "qvec": qvec, "w": p.semantic_weight, "depth": depth,
                                       "limit": limit})).all()
        ranked = [(r.chunk_id, float(r.score)) for r in rows]
        sem = {r.chunk_id: float(r.cos) for r in rows}
        kw = {r.chunk_id: float(r.bm25) for r in rows if r.bm25 is not None}
    if not ranked:
        return []
    vis = _visible_contents(scope, folder_id, [cid for cid, _ in ranked]).cte("vis")
    return await _details(session, vis, ranked, sem, kw, mode)


async def _details(session: AsyncSession, vis: Any, ranked: list[tuple[uuid.UUID, float]],
                   sem: dict[uuid.UUID, float], kw: dict[uuid.UUID, float], mode: str) -> list[dict[str, Any]]:
    ids = [cid for cid, _ in ranked]
    rows = {r.id: r for r in (await session.execute(
        select(chunks.c.id, chunks.c.text, vis.c.item_id, vis.c.item_title, vis.c.item_url)
        .join(vis, vis.c.content_id == chunks.c.content_id).where(chunks.c.id.in_(ids))
    ))}
    out = []
    for cid, score in ranked:
        r = rows.get(cid)
        if r is None:
            continue
        out.append({
            "chunk_id": str(cid), "item_id": str(r.item_id), "title": r.item_title, "url": r.item_url,
            "text": r.text, "score": score,
            "similarity": None if mode == "keyword" else sem.get(cid),
            "keyword_rank": None if mode == "semantic" else kw.get(cid),
        })
    return out



