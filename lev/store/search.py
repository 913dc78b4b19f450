"""Search over chunks: semantic (pgvector HNSW), keyword (BM25 in SQL) and hybrid (normalised linear blend).

The caller's scope (user, folders, kb_only) and `in_kb` are applied inside the SQL, before any limit. Keyword scoring
is BM25 over the postings kept by migration 0002; bench/LAB_NOTES.md explains the choices and bench/RESULTS.md has
the measurements behind the default parameters."""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from lev.store.filters import Filters
from lev.store.scope import Scope
from lev.store.scoped_sql import Bound, bound_params, item_sql, probe_sql, scope_sql
from lev.store.statements import statement, with_vector

MODES = ("hybrid", "semantic", "keyword")
PGVECTOR_EF_MAX = 1000  # the largest hnsw.ef_search pgvector accepts
# Relaxed order: the walk hands rows over batch by batch; the statement sorts what it keeps (docs/decisions.md, 49).
ITERATIVE_SCAN = "relaxed_order"
LOCATION_FIELDS = ("char_start", "char_end", "page", "page_end", "heading", "slide", "sheet", "row_start", "row_end")



@dataclass(frozen=True)
class SearchParams:
    """The tuning knobs: the operator's are settings (read by `lev.library.reads.search_params()`), the rest fixed."""

    candidates: int
    semantic_weight: float
    k1: float
    b: float
    prune_df: float
    ef_search: int
    exact_scan_max_chunks: int  # below this many visible chunks, scan exactly instead of HNSW
    keep_rarest: int = 3
    probe_min_share: float = 0.2  # scopes covering at least this share of all chunks are probed per candidate
    # Below that share, a sel term whose document frequency exceeds this many times the scope's contents is read
    # content by content (its postings in the scope only) instead of scanning its whole posting list: one index
    # probe costs about as much as reading 5-15 postings (bench/TUNING.md §9).
    per_content_factor: float = 8.0
    # pgvector 0.8's iterative index scan (measured in docs/decisions.md, issue 49): a walk goes on until the scope
    # has let `want` rows through, visiting at most `max_scan_tuples` index tuples. A semantic walk wants
    # `walk_overfetch` x the rows (relaxed order: the first through are not always the nearest) and at least
    # `walk_min_visits` tuples' worth; a hybrid one its candidates. A scope is scanned exactly when its chunks cost
    # less than its walk's expected tuples at `walk_tuple_cost` exact rows each, or that walk passes `max_scan_tuples`.
    max_scan_tuples: int = 20_000
    walk_tuple_cost: float = 15.0  # a paired bench: the 5 % folder's walk cost more than its exact scan
    walk_overfetch: float = 4.0  # 2x found 0.955 of the exact answer in tests/library's 5 % folder, 4x 0.99
    walk_min_visits: int = 80


_Q = "q AS MATERIALIZED (SELECT * FROM lev_bm25_query(:q, :k1, :b, :prune, :keep))"
_BM25 = "sum(q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl))"

# Keyword candidates: the sum over the pruned ("sel") terms' posting lists, top `depth` by that partial score.
# `s` is exact for the sel terms, so rescoring only has to add the other query terms. The scope is applied
# either to the postings before grouping (_KW_CAND_FILTERED: scopes covering a small share of the corpus) or
# lazily to the ranked groups ({outer}: one index probe per group until `depth` pass, for scopes covering much of
# the corpus). The lazy form first ranks only the top :over groups (a bounded heap sort); only if fewer than
# `depth` of those pass does it rank them all. Either way the result is the first `depth` visible groups in
# (score, chunk_id) order.
_KW_RANKED = f"""
  SELECT p.chunk_id, p.content_id, {_BM25} AS s
    FROM q JOIN lev_postings p ON p.lexeme = q.lexeme
   WHERE q.sel
   GROUP BY p.chunk_id, p.content_id
   ORDER BY s DESC, p.chunk_id
"""
_KW_CAND_PROBED = f"""
kw_top AS MATERIALIZED (
  SELECT o.chunk_id, o.s FROM ({_KW_RANKED} LIMIT :over) o WHERE {{outer}} LIMIT :depth
), cand AS (
  SELECT chunk_id, s FROM kw_top WHERE (SELECT count(*) FROM kw_top) >= :depth
  UNION ALL
  SELECT * FROM (
    SELECT o.chunk_id, o.s FROM ({_KW_RANKED} OFFSET 0) o WHERE {{outer}} LIMIT :depth
  ) kw_all WHERE (SELECT count(*) FROM kw_top) < :depth
)"""
# Filtered first, every ranked group is visible: the first `depth` are the candidates (no second ranking when a
# small scope has fewer matches than `depth`). The scope's contents ({scope}) are found once (`sc`, where a content
# may appear twice) and hashed: a sel term with a short posting list is scanned and semi-joined with them (not
# probed posting by posting: a filter's conditions, a site's host function, would be evaluated once per posting);
# one with more than :per_content_df postings is read per visible content (index lev_postings_content), so a small
# scope never reads other users' postings of a common term. `sc` is not made distinct: the planner's estimate of a
# folder's distinct contents read item by item is one row, which turned the hash join into a probe per content.
_TERM = "q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl)"
_KW_CAND_FILTERED = f"""
sc AS MATERIALIZED (SELECT v.content_id FROM ({{scope}}) v),
cand AS (
  SELECT x.chunk_id, sum(x.s) AS s FROM (
    SELECT p.chunk_id, {_TERM} AS s
      FROM q JOIN lev_postings p ON p.lexeme = q.lexeme
     WHERE q.sel AND q.df <= :per_content_df AND p.content_id IN (SELECT sc.content_id FROM sc)
    UNION ALL
    SELECT t.chunk_id, t.s
      FROM (SELECT DISTINCT sc.content_id FROM sc) d CROSS JOIN q CROSS JOIN LATERAL (
        SELECT p.chunk_id, {_TERM} AS s FROM lev_postings p
         WHERE p.lexeme = q.lexeme AND p.content_id = d.content_id
        OFFSET 0) t
     WHERE q.sel AND q.df > :per_content_df
  ) x
  GROUP BY x.chunk_id
  ORDER BY s DESC, x.chunk_id
  LIMIT :depth
)"""


def _rest(chunk: str) -> str:
    """BM25 contribution of the query terms that were not used for candidates (common terms), for one chunk."""
    return (f"coalesce((SELECT {_BM25} FROM q JOIN lev_postings p ON p.lexeme = q.lexeme AND p.chunk_id = {chunk}"
            " WHERE NOT q.sel), 0)")


# Every statement ends with `ranked` (chunk_id, cos, bm25, score; at most :limit rows) and this: the chunk's text
# and location and, for its content, the newest item visible to the caller ({item}: a correlated, per-scope subquery).
_DETAILS = """
SELECT r.chunk_id, r.cos, r.bm25, r.score, c.text, c.start_sec, c.end_sec, v.item_id, v.item_title, v.item_url,
       v.item_kind, v.item_media, v.item_created, l.char_start, l.char_end, l.page, l.page_end, l.heading, l.slide,
       l.sheet, l.row_start, l.row_end
  FROM ranked r
  JOIN chunks c ON c.id = r.chunk_id
  LEFT JOIN chunk_locations l ON l.chunk_id = r.chunk_id
 CROSS JOIN LATERAL ({item}) v
 ORDER BY r.score DESC, r.chunk_id
"""

_KEYWORD_SQL = f"""
WITH {_Q}, {{cand}}, ranked AS (
  SELECT chunk_id, NULL::float8 AS cos, score AS bm25, score
    FROM (SELECT cand.chunk_id, cand.s + {_rest("cand.chunk_id")} AS score FROM cand) k
   ORDER BY score DESC, chunk_id
   LIMIT :limit
)""" + _DETAILS

_KW_CAND_SQL = f"WITH {_Q}, {{cand}} SELECT chunk_id, s FROM cand"
# The same, filtered first, plus one row: the scope's contents (`sc`), read by the hybrid's exact vector side. They
# travel as one text value, not a uuid[]: a 5 % folder's 2,076 ids cost 3.5 ms a search as Python UUIDs read back and
# sent again (docs/decisions.md, issue 49).
_KW_CAND_SCOPE_SQL = (f"WITH {_Q}, {{cand}} SELECT chunk_id, s, NULL::text AS contents FROM cand"
                      " UNION ALL SELECT NULL, NULL, CAST(ARRAY(SELECT DISTINCT content_id FROM sc) AS text)")
_SCOPE_CONTENTS = "c.content_id = ANY(CAST(:scope_contents AS uuid[]))"

# The nearest {n} visible chunks and their cosine distance `d`, computed once per row. `{exact}` "+ 0" defeats the
# HNSW index (an exact scan of the rows {filter} lets through).
_NEAREST = """SELECT c.id AS chunk_id, (c.embedding <=> CAST(:qvec AS vector)) {exact} AS d
  FROM chunks c WHERE {filter} ORDER BY d LIMIT {n}"""
# An index scan that left fewer than :vec_min visible rows (its iterative walk stopped at `max_scan_tuples` before
# the scope let enough through) is replaced by the exact scan of the scope: a search never comes back short.
_NEAREST_OR_EXACT = """WITH ann AS MATERIALIZED ({ann})
SELECT * FROM ann WHERE (SELECT count(*) FROM ann) >= :vec_min
UNION ALL
SELECT * FROM ({exact}) e WHERE (SELECT count(*) FROM ann) < :vec_min"""

SEMANTIC_SQL = """
WITH ranked AS (
  SELECT n.chunk_id, 1 - n.d AS cos, NULL::float8 AS bm25, 1 - n.d / 2 AS score
    FROM ({nearest}) n
   ORDER BY n.d
   LIMIT :limit
)""" + _DETAILS

# Hybrid, second statement: the keyword candidates (ids and sel-term scores, found while the query was being
# embedded) and the top-depth nearest neighbours; both scores made exact for every candidate of the union,
# min-max normalised over it (a signal all candidates share counts fully) and blended with weight w on cosine,
# then mapped into [0.05, 1] so that every hit scores above zero (the order is the blend's). When the keyword
# candidates are complete (fewer than `depth`: every visible chunk holding a sel term is among them), a
# vector-only candidate holds no sel term, so only the other query terms are looked up for it (:kw_complete).
_HYBRID_SQL = f"""
WITH {_Q}, kw AS (
  SELECT * FROM unnest(CAST(:kw_ids AS uuid[]), CAST(:kw_s AS float8[])) AS k(chunk_id, s)
), vec AS MATERIALIZED (
  SELECT n.chunk_id, 1 - n.d AS cos FROM ({{nearest}}) n
), scored AS MATERIALIZED (
  SELECT coalesce(kw.chunk_id, vec.chunk_id) AS chunk_id,
         coalesce(vec.cos, (SELECT 1 - (c.embedding <=> CAST(:qvec AS vector)) FROM chunks c
                             WHERE c.id = kw.chunk_id)) AS cos,
         CASE WHEN kw.chunk_id IS NOT NULL THEN kw.s + {_rest("kw.chunk_id")}
              ELSE (SELECT {_BM25} FROM q JOIN lev_postings p ON p.lexeme = q.lexeme AND p.chunk_id = vec.chunk_id
                     WHERE NOT (q.sel AND :kw_complete))
         END AS bm25
    FROM kw FULL JOIN vec ON vec.chunk_id = kw.chunk_id
), norm AS (
  SELECT *, min(cos) OVER () AS cmin, max(cos) OVER () AS cmax,
            min(coalesce(bm25, 0)) OVER () AS bmin, max(coalesce(bm25, 0)) OVER () AS bmax
    FROM scored
), ranked AS (
  SELECT chunk_id, cos, bm25,
         0.05 + 0.95 * (
           :w * CASE WHEN cmax > cmin THEN (cos - cmin) / (cmax - cmin) ELSE 1 END
         + (1 - :w) * CASE WHEN coalesce(bm25, 0) = 0 THEN 0
                           WHEN bmax > bmin THEN (bm25 - bmin) / (bmax - bmin) ELSE 1 END) AS score
    FROM norm
   ORDER BY score DESC, chunk_id
   LIMIT :limit
)""" + _DETAILS


@dataclass(frozen=True)
class _Size:
    chunks: int  # visible to the scope
    contents: int  # visible to the scope
    total: int  # all chunks


_ESTIMATES: dict[tuple[Scope, Filters | None], tuple[float, _Size]] = {}
_ESTIMATE_TTL = 30.0


async def _scope_size(session: AsyncSession, scope: Scope, filters: Filters | None) -> _Size:
    """What the scope (narrowed by the filters) sees, cached briefly per scope: it only picks a scan strategy."""
    key = (scope, filters)
    hit = _ESTIMATES.get(key)
    if hit and time.monotonic() - hit[0] < _ESTIMATE_TTL:
        return hit[1]
    scope_in = scope_sql(scope, filters)
    row = (await session.execute(text(
        f"SELECT (SELECT count(*) FROM chunks c WHERE c.content_id IN ({scope_in.sql})),"
        f" (SELECT count(DISTINCT v.content_id) FROM ({scope_in.sql}) v),"
        " (SELECT greatest(n_chunks, 1) FROM lev_bm25_stats)"), scope_in.params)).one()
    if len(_ESTIMATES) > 10_000:
        _ESTIMATES.clear()
    size = _Size(int(row[0]), int(row[1]), int(row[2]))
    _ESTIMATES[key] = (time.monotonic(), size)
    return size


@dataclass(frozen=True)
class Plan:
    kw_cand: str  # the `cand` CTE (chunk_id, s) of the keyword candidates, with the scope applied
    kw_over: int  # keyword groups ranked before probing (see _KW_CAND_PROBED)
    vec_filter: str
    exact: str  # "+ 0" defeats the HNSW index: exact scan
    ef: int | None = None  # hnsw.ef_search for the index scan (None: exact scan, no index)
    max_scan_tuples: int = 20_000  # hnsw.max_scan_tuples: where the index scan's iterative walk stops
    per_content_df: int = 0  # sel terms with more postings are read per visible content (_KW_CAND_FILTERED)
    params: dict[str, Any] = field(default_factory=dict)  # the scope's values for the parts above
    fallback: str | None = None  # an index scan's exact-scan filter, used when it leaves too few rows
    kw_filtered: bool = False  # kw_cand is _KW_CAND_FILTERED: the scope's contents are found once, as `sc`

    def bound(self, *parts: Bound) -> dict[str, Any]:
        """The plan's scope values together with those of other embedded parts (`bound_params`)."""
        return bound_params(Bound("", self.params), *parts)

    def nearest(self, n: str) -> str:
        """The nearest `n` (a literal or a `:name`) visible chunks as (chunk_id, d); with an index scan, the exact
        scan when it leaves fewer than `:vec_min`."""
        near = _NEAREST.format(exact=self.exact, filter=self.vec_filter, n=n)
        if self.fallback is None:
            return near
        # The walk hands its rows over in relaxed order: it is asked for `:walk` rows (more than `n`), and the
        # nearest `n` of them are kept (sorted by `d * 1`: the walk's own order on `d` would be taken as sorted).
        near = (f"SELECT * FROM ({_NEAREST.format(exact=self.exact, filter=self.vec_filter, n=':walk')}) w"
                f" ORDER BY w.d * 1 LIMIT {n}")
        return _NEAREST_OR_EXACT.format(ann=near, exact=_NEAREST.format(exact="+ 0", filter=self.fallback, n=n))


async def plan_scope(session: AsyncSession, scope: Scope, filters: Filters | None, depth: int, mode: str,
                     p: SearchParams) -> Plan:
    """How to apply the scope, from the share of the corpus it covers: a large one is probed per candidate, a small
    one applied as an IN list first (a folder's contents read from its memberships). The vector side walks the HNSW
    index iteratively (the nearest `depth` of `want` kept, settings sent by `use_plan_walk`, the exact scan behind a
    walk that stops short) unless the cost rule (SearchParams) scans the scope exactly (its contents found once, as
    an array)."""
    size = await _scope_size(session, scope, filters)
    exact_in = scope_sql(scope, filters, by_folder=True)  # a folder's contents read from its memberships
    share = max(size.chunks, 1) / size.total
    per_content_df = 0
    if share >= p.probe_min_share:
        outer = probe_sql(scope, filters, "o.content_id")
        kw = (_KW_CAND_PROBED.format(outer=outer.sql), math.ceil(2 * depth / min(share, 1.0)))
        kw_part = outer
    else:
        kw = (_KW_CAND_FILTERED.format(scope=exact_in.sql), depth)
        kw_part = exact_in
        per_content_df = min(2**31 - 1, math.ceil(p.per_content_factor * size.contents))
    exact = f"c.content_id = ANY(ARRAY({exact_in.sql}))"
    want = depth if mode == "hybrid" else max(math.ceil(p.walk_overfetch * depth),
                                              math.ceil(p.walk_min_visits * min(share, 1.0)))
    ef = min(PGVECTOR_EF_MAX, max(p.ef_search, want))
    visits = want / share  # index tuples the walk is expected to visit before the scope has let `want` through
    if mode == "keyword" or size.chunks <= max(p.exact_scan_max_chunks, p.walk_tuple_cost * visits) \
            or visits > p.max_scan_tuples:
        return Plan(*kw, exact, "+ 0", per_content_df=per_content_df, params=bound_params(kw_part, exact_in),
                    kw_filtered=share < p.probe_min_share)
    probe = probe_sql(scope, filters, "c.content_id")
    walk = Bound("", {"walk": want})
    plan = Plan(*kw, probe.sql, "", ef, p.max_scan_tuples, per_content_df,
                bound_params(kw_part, probe, exact_in, walk), exact, share < p.probe_min_share)
    await use_plan_walk(session, plan)
    return plan


async def use_plan_walk(session: AsyncSession, plan: Plan) -> None:
    """Send the index scan's settings (`hnsw.ef_search`, `hnsw.iterative_scan`, `hnsw.max_scan_tuples`), in one
    statement. Inside a transaction: local to it. On an autocommit connection (a search's reads): for the session,
    sent only when the connection's last ones differ (they are remembered with the connection), so a run of
    searches over the same scope pays no extra round trip."""
    if plan.ef is None:
        return
    conn = await session.connection()
    raw = await conn.get_raw_connection()
    local = not getattr(raw.driver_connection, "autocommit", False)
    walk = (int(plan.ef), ITERATIVE_SCAN, int(plan.max_scan_tuples))
    if not local and raw.info.get("hnsw") == walk:
        return
    await session.execute(text(
        "SELECT set_config('hnsw.ef_search', :ef, :local), set_config('hnsw.iterative_scan', :mode, :local),"
        " set_config('hnsw.max_scan_tuples', :tuples, :local)"),
        {"ef": str(walk[0]), "mode": walk[1], "tuples": str(walk[2]), "local": local})
    if not local:
        raw.info["hnsw"] = walk


async def search(
    session: AsyncSession, scope: Scope, *, query: str, query_vector: list[float] | Awaitable[list[float]] | None,
    mode: str, limit: int, params: SearchParams, filters: Filters | None = None,
) -> list[dict[str, Any]]:
    """Top `limit` chunks visible to `scope` (narrowed by `filters`) for `query`, as result objects (DESIGN.md §4, §11).

    `query_vector` may still be computing (an awaitable): planning and the keyword candidates run meanwhile.
    """
    p = params
    depth = max(p.candidates, limit)
    filters = None if filters is None or filters.empty else filters
    plan = await plan_scope(session, scope, filters, limit if mode == "semantic" else depth, mode, p)
    found = item_sql(scope, filters)
    scoped = plan.bound(found)
    bm25 = {"q": query, "k1": p.k1, "b": p.b, "prune": p.prune_df, "keep": p.keep_rarest, "depth": depth,
            "over": plan.kw_over, "per_content_df": plan.per_content_df, **scoped}
    item = found.sql
    if mode == "keyword":
        rows = (await session.execute(statement(_KEYWORD_SQL.format(cand=plan.kw_cand, item=item)),
                                      {**bm25, "limit": limit})).all()
    elif mode == "semantic":
        sql = SEMANTIC_SQL.format(nearest=plan.nearest(":limit"), item=item)
        rows = (await session.execute(with_vector(sql), {"qvec": await _resolve(query_vector), "limit": limit,
                                                         "vec_min": limit, **scoped})).all()
    else:
        # filtered first and scanned exactly: the scope's contents come with the keyword candidates
        shared = plan.kw_filtered and plan.ef is None
        found_kw = (await session.execute(statement((_KW_CAND_SCOPE_SQL if shared else _KW_CAND_SQL).format(
            cand=plan.kw_cand)), bm25)).all()
        cand = [r for r in found_kw if r.chunk_id is not None]
        nearest = _NEAREST.format(exact="+ 0", filter=_SCOPE_CONTENTS, n=":depth") if shared \
            else plan.nearest(":depth")
        sql = _HYBRID_SQL.format(nearest=nearest, item=item)
        contents = {"scope_contents": next(r.contents for r in found_kw if r.chunk_id is None)} if shared else {}
        values = {**bm25, **contents, "qvec": await _resolve(query_vector), "w": p.semantic_weight, "limit": limit,
                  "vec_min": 0 if len(cand) >= limit else limit,  # enough keyword hits: the result is not short
                  "kw_ids": [r.chunk_id for r in cand], "kw_s": [float(r.s) for r in cand],
                  "kw_complete": len(cand) < depth}
        rows = (await session.execute(with_vector(sql), values)).all()
    return [{
        "chunk_id": str(r.chunk_id), "item_id": str(r.item_id), "title": r.item_title, "url": r.item_url,
        "text": r.text, "score": float(r.score),
        "similarity": None if mode == "keyword" else float(r.cos),
        "keyword_rank": None if mode == "semantic" or r.bm25 is None else float(r.bm25),
        "kind": r.item_kind, "saved_at": r.item_created.isoformat(), "stored_media": bool(r.item_media),
        "start_sec": r.start_sec, "end_sec": r.end_sec,
        "location": {k: getattr(r, k) for k in LOCATION_FIELDS},
    } for r in rows]


async def _resolve(vector: list[float] | Awaitable[list[float]] | None) -> list[float]:
    if vector is None:
        raise ValueError("semantic and hybrid search need a query vector")
    return await vector if inspect.isawaitable(vector) else vector
