"""Search over chunks: semantic (pgvector HNSW), keyword (PostgreSQL full text) and hybrid (fusion).

The caller's scope (user, folders, kb_only) and `in_kb` are applied inside the SQL, before any limit.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import exists, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from lev.policy import Scope
from store.items import visible
from store.models import chunks, item_folders, user_items

MODES = ("hybrid", "semantic", "keyword")


@dataclass(frozen=True)
class SearchParams:
    candidates: int = 100
    rrf_k: int = 60
    semantic_weight: float = 0.5
    ef_search: int = 100


def _visible_contents(scope: Scope, folder_id: uuid.UUID | None) -> Any:
    q = (
        select(user_items.c.content_id, user_items.c.id.label("item_id"), user_items.c.title.label("item_title"),
               user_items.c.url.label("item_url"))
        .where(visible(scope), user_items.c.in_kb.is_(True), user_items.c.status == "ready")
        .distinct(user_items.c.content_id)
        .order_by(user_items.c.content_id, user_items.c.created_at.desc())
    )
    if folder_id is not None:
        q = q.where(exists().where(item_folders.c.item_id == user_items.c.id, item_folders.c.folder_id == folder_id))
    return q.cte("vis")


async def _semantic(session: AsyncSession, vis: Any, qvec: np.ndarray, n: int) -> list[tuple[uuid.UUID, float]]:
    dist = chunks.c.embedding.cosine_distance(qvec)
    in_scope = chunks.c.content_id.in_(select(vis.c.content_id))
    rows = (await session.execute(
        select(chunks.c.id, dist.label("d")).where(in_scope).order_by(dist).limit(n)
    )).all()
    if len(rows) < n:
        # The HNSW scan filters after the index; a small scope can leave it short. Exact scan instead.
        exact = (await session.execute(
            select(chunks.c.id, dist.label("d")).where(in_scope).order_by(dist + 0).limit(n)
        )).all()
        if len(exact) > len(rows):
            rows = exact
    return [(r.id, 1.0 - float(r.d)) for r in rows]


async def _keyword(session: AsyncSession, vis: Any, query: str, n: int) -> list[tuple[uuid.UUID, float]]:
    tsq = func.websearch_to_tsquery("english", query)
    rank = func.ts_rank_cd(chunks.c.tsv, tsq, 32)
    rows = (await session.execute(
        select(chunks.c.id, rank.label("r"))
        .where(chunks.c.tsv.op("@@")(tsq), chunks.c.content_id.in_(select(vis.c.content_id)))
        .order_by(rank.desc(), chunks.c.id).limit(n)
    )).all()
    return [(r.id, float(r.r)) for r in rows]


def fuse(semantic: list[tuple[uuid.UUID, float]], keyword: list[tuple[uuid.UUID, float]], k: int,
         semantic_weight: float) -> list[tuple[uuid.UUID, float]]:
    """Weighted Reciprocal Rank Fusion of two ranked lists."""
    scores: dict[uuid.UUID, float] = {}
    for weight, ranked in ((semantic_weight, semantic), (1.0 - semantic_weight, keyword)):
        for rank, (cid, _) in enumerate(ranked, start=1):
            scores[cid] = scores.get(cid, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], str(kv[0])))


async def search(
    session: AsyncSession, scope: Scope, *, query: str, query_vector: list[float] | None, mode: str, limit: int,
    folder_id: uuid.UUID | None = None, params: SearchParams | None = None,
) -> list[dict[str, Any]]:
    """Top `limit` chunks visible to `scope` for `query`, as result objects (DESIGN.md §4)."""
    p = params or SearchParams()
    await session.execute(text(f"SET LOCAL hnsw.ef_search = {int(max(p.ef_search, limit))}"))
    vis = _visible_contents(scope, folder_id)
    qvec = np.asarray(query_vector, dtype=np.float32) if query_vector is not None else None
    depth = max(p.candidates, limit)
    sem: list[tuple[uuid.UUID, float]] = []
    kw: list[tuple[uuid.UUID, float]] = []
    if mode in ("hybrid", "semantic"):
        assert qvec is not None
        sem = await _semantic(session, vis, qvec, depth if mode == "hybrid" else limit)
    if mode in ("hybrid", "keyword"):
        kw = await _keyword(session, vis, query, depth if mode == "hybrid" else limit)
    if mode == "semantic":
        ranked = sem[:limit]
    elif mode == "keyword":
        ranked = kw[:limit]
    else:
        ranked = fuse(sem, kw, p.rrf_k, p.semantic_weight)[:limit]
    if not ranked:
        return []
    return await _details(session, vis, ranked, dict(sem), dict(kw), qvec, mode)


async def _details(session: AsyncSession, vis: Any, ranked: list[tuple[uuid.UUID, float]],
                   sem: dict[uuid.UUID, float], kw: dict[uuid.UUID, float], qvec: np.ndarray | None,
                   mode: str) -> list[dict[str, Any]]:
    ids = [cid for cid, _ in ranked]
    cols = [chunks.c.id, chunks.c.text, vis.c.item_id, vis.c.item_title, vis.c.item_url]
    if qvec is not None and mode == "hybrid":
        cols.append((1 - chunks.c.embedding.cosine_distance(qvec)).label("sim"))
    rows = {r.id: r for r in (await session.execute(
        select(*cols).join(vis, vis.c.content_id == chunks.c.content_id).where(chunks.c.id.in_(ids))
    ))}
    out = []
    for cid, score in ranked:
        r = rows.get(cid)
        if r is None:
            continue
        similarity = sem.get(cid)
        if similarity is None and mode == "hybrid":
            similarity = float(r.sim)
        out.append({
            "chunk_id": str(cid), "item_id": str(r.item_id), "title": r.item_title, "url": r.item_url,
            "text": r.text, "score": float(score),
            "similarity": None if mode == "keyword" else similarity,
            "keyword_rank": None if mode == "semantic" else kw.get(cid),
        })
    return out
