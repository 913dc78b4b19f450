"""Search over the caller's highlights: each highlight's passage and note scored against a query as a chunk would
be (cosine similarity of its vector, BM25 with the chunks' statistics: a word no chunk holds counts as the rarest),
on the searchable items the caller can see. A user's highlights are few, so every visible one is scored."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import literal_column, select

from lev.store.filters import Filters
from lev.store.models import contents, user_items
from lev.store.scope import Scope
from lev.store.scoped_sql import Bound, sql_text, visible_where
from lev.store.statements import statement, with_vector

_SQL = """
WITH s AS (SELECT greatest(n_chunks, 1)::float8 AS n, greatest(total_len, 1)::float8 AS len FROM lev_bm25_stats),
q AS MATERIALIZED (
  SELECT DISTINCT w.lexeme, ln(1 + (s.n - coalesce(t.df, 0) + 0.5) / (coalesce(t.df, 0) + 0.5)) AS idf,
         :k1 * (1 - :b) AS kb0, :k1 * :b * s.n / s.len AS kb1
    FROM s CROSS JOIN unnest(tsvector_to_array(to_tsvector('english', :q))) AS w(lexeme)
    LEFT JOIN lev_bm25_terms t ON t.lexeme = w.lexeme
), h AS MATERIALIZED (
  SELECT h.id, h.item_id, h.text, h.note, h.char_start, h.char_end, v.title, v.url, v.kind, v.content_id,
         v.created_at,
         {cos} AS cos,
         CASE WHEN tsvector_to_array(h.tsv) && (SELECT array_agg(q.lexeme) FROM q) THEN
           (SELECT sum(q.idf * cardinality(u.positions)
                       / (cardinality(u.positions) + q.kb0 + q.kb1 * lev_tsv_len(h.tsv)))
              FROM unnest(h.tsv) u JOIN q ON q.lexeme = u.lexeme) END AS bm25
    FROM highlights h CROSS JOIN LATERAL ({item}) v
   WHERE h.user_id = :hl_user
), ranked AS (
  SELECT h.*, row_number() OVER (ORDER BY h.cos DESC NULLS LAST, h.id) AS near FROM h
)
SELECT r.id, r.item_id, r.text, r.note, r.char_start, r.char_end, r.cos, r.bm25, r.title, r.url, r.kind,
       r.created_at, r.content_id, ct.object_path IS NOT NULL AS stored_media, coalesce(at.id, first.id) AS chunk_id,
       at.start_sec, at.end_sec
  FROM ranked r
  JOIN contents ct ON ct.id = r.content_id
  LEFT JOIN LATERAL (  -- the chunk the passage starts in (its seconds, for a recording)
    SELECT c.id, c.start_sec, c.end_sec FROM chunks c JOIN chunk_locations l ON l.chunk_id = c.id
     WHERE c.content_id = r.content_id AND l.char_start <= r.char_start
     ORDER BY l.char_start DESC LIMIT 1) at ON true
  LEFT JOIN LATERAL (SELECT c.id FROM chunks c WHERE c.content_id = r.content_id ORDER BY c.ord LIMIT 1) first ON true
 WHERE coalesce(r.bm25, 0) > 0 OR (:semantic AND r.near <= :limit)
"""


@lru_cache(maxsize=4096)
def _item_probe(scope: Scope, filters: Filters | None) -> Bound:
    """The highlight's item, if the caller may search it: one index probe per highlight (OFFSET 0 keeps it one);
    compiled once per scope shape."""
    return sql_text(select(user_items.c.title, user_items.c.url, user_items.c.kind, user_items.c.content_id,
                           user_items.c.created_at)
                    .where(user_items.c.id == literal_column("h.item_id"), *visible_where(scope, filters))
                    .offset(0))


async def candidates(session: Any, scope: Scope, *, query: str, query_vector: list[float] | None, mode: str,
                     limit: int, k1: float, b: float, filters: Filters | None = None) -> list[dict[str, Any]]:
    """The caller's highlights that match `query`: those holding a query word (keyword and hybrid), and the
    `limit` nearest (semantic and hybrid), each with `cos` (None in keyword mode) and `bm25` (None or 0 when no
    word matches). `filters` narrow the searchable items as they narrow chunk search."""
    items = _item_probe(scope, filters)
    semantic = mode != "keyword" and query_vector is not None
    sql = _SQL.format(item=items.sql, cos="1 - (h.embedding <=> CAST(:qvec AS vector))" if semantic else
                      "NULL::float8")
    values: dict[str, Any] = {"q": query, "k1": k1, "b": b, "hl_user": scope.user_id, "semantic": semantic,
                              "limit": limit, **items.params}
    if semantic:
        rows = await session.execute(with_vector(sql), {**values, "qvec": query_vector})
    else:
        rows = await session.execute(statement(sql), values)
    found = [dict(r._mapping) for r in rows]
    ids = sorted({r["content_id"] for r in found})
    outlines = dict((await session.execute(select(contents.c.id, contents.c.outline)
                                          .where(contents.c.id.in_(ids)))).all()) if ids else {}
    for r in found:  # one outline per content, read once however many of its highlights match
        r["outline"] = outlines.get(r["content_id"])
    return found
