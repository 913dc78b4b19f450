"""Lab: where a small user's hybrid search spends its time in a database of 300k chunks and 1,000 users.

Standalone research script (not part of `make bench`): builds the busy part's 312k-chunk database, then times
the pieces of one small user's search in-process (query embedding, planning, keyword candidates, the hybrid
statement) and through REST, and prints EXPLAIN ANALYZE of the keyword candidates. `--keep` leaves Lev running
and prints its data dir for further experiments.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from typing import Any

import httpx
import numpy as np

from bench.busy import QUIET, base_corpus, grow, other_users, reindex
from bench.common import SCIFACT, cleanup, pct, start_lev
from bench.latency import db_url
from bench.scifact import load_data


def main() -> None:
    import psycopg
    from pgvector.psycopg import register_vector
    from sqlalchemy import text

    from lev.core.settings import get_settings
    from lev.embedding.embedder import LocalEmbedder
    from lev.library.reads import search_params
    from lev.store import scoped_sql
    from lev.store import search as ss
    from lev.store.scope import Scope

    ap = argparse.ArgumentParser()
    ap.add_argument("--big", type=int, default=300_000)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    _, queries, qrels = load_data(SCIFACT)
    test = [queries[q] for q in qrels["test"] if q in queries][: args.n]
    base = base_corpus()
    lev = start_lev(QUIET)
    rng, nrng = random.Random(18), np.random.default_rng(18)
    with psycopg.connect(db_url(), autocommit=True) as conn:
        register_vector(conn)
        conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
        t = time.perf_counter()
        grow(conn, base, [(lev.user_id, args.big)], rng, nrng)
        small_id, small_token = other_users(conn, lev, base, rng, nrng)
        reindex(conn)
        print(f"built in {time.perf_counter() - t:.0f} s; data dir {lev.data_dir}", flush=True)

    emb = LocalEmbedder()
    scope = Scope(small_id, None, kb_only=True)
    p = search_params(get_settings())
    timings: dict[str, list[float]] = {k: [] for k in ("embed", "plan", "kw_cand", "hybrid_sql", "search", "rest")}

    async def pieces(s: Any, q: str, vec: list[float]) -> None:
        depth = max(p.candidates, 10)
        t0 = time.perf_counter()
        plan = await ss.plan_scope(s, scope, None, depth, "hybrid", p)
        t1 = time.perf_counter()
        found = scoped_sql.item_sql(scope, None)
        bm25 = {"q": q, "k1": p.k1, "b": p.b, "prune": p.prune_df, "keep": p.keep_rarest, "depth": depth,
                "over": plan.kw_over, "per_content_df": plan.per_content_df,
                **plan.bound(found)}
        cand = (await s.execute(text(ss._KW_CAND_SQL.format(cand=plan.kw_cand)), bm25)).all()
        t2 = time.perf_counter()
        sql = ss._HYBRID_SQL.format(nearest=plan.nearest(":depth"), item=found.sql)
        await s.execute(ss.with_vector(sql), {**bm25, "qvec": vec, "w": p.semantic_weight, "limit": 10, "vec_min": 10,
                                              "kw_ids": [r.chunk_id for r in cand], "kw_s": [float(r.s) for r in cand],
                                              "kw_complete": len(cand) < depth})
        t3 = time.perf_counter()
        timings["plan"].append((t1 - t0) * 1000)
        timings["kw_cand"].append((t2 - t1) * 1000)
        timings["hybrid_sql"].append((t3 - t2) * 1000)

    for q in test[:10]:
        lev.admin.run(lambda s, q=q: pieces(s, q, emb.embed_query(q)))
    for q in test:
        t = time.perf_counter()
        vec = emb.embed_query(q)
        timings["embed"].append((time.perf_counter() - t) * 1000)
        lev.admin.run(lambda s, q=q, vec=vec: pieces(s, q, vec))
        t = time.perf_counter()
        lev.admin.run(lambda s, q=q, vec=vec: ss.search(s, scope, query=q, query_vector=vec, mode="hybrid",
                                                      limit=10, params=p))
        timings["search"].append((time.perf_counter() - t) * 1000)
    with httpx.Client(base_url=lev.url, headers={"Authorization": f"Bearer {small_token}"}) as c:
        for q in test[:10]:
            c.get("/api/v1/search", params={"q": q, "mode": "hybrid"})
        for q in test:
            t = time.perf_counter()
            c.get("/api/v1/search", params={"q": q, "mode": "hybrid"}).raise_for_status()
            timings["rest"].append((time.perf_counter() - t) * 1000)
    for k, v in timings.items():
        d = pct(v)
        print(f"{k:12s} p50 {d['p50']:6.1f}  p95 {d['p95']:6.1f}  p99 {d['p99']:6.1f} ms")

    async def explain(s: Any, q: str) -> None:
        depth = max(p.candidates, 10)
        plan = await ss.plan_scope(s, scope, None, depth, "hybrid", p)
        bm25 = {"q": q, "k1": p.k1, "b": p.b, "prune": p.prune_df, "keep": p.keep_rarest, "depth": depth,
                "over": plan.kw_over, "per_content_df": plan.per_content_df, **plan.params}
        sql = "EXPLAIN (ANALYZE, BUFFERS) " + ss._KW_CAND_SQL.format(cand=plan.kw_cand)
        for row in (await s.execute(text(sql), bm25)).all():
            print(row[0])

    lev.admin.run(lambda s: explain(s, test[0]))
    print(f"small user {small_id}; server {lev.url}; database {db_url()}", flush=True)
    if args.keep:
        with open("/tmp/lab_small.token", "w") as f:
            f.write(f"{small_id} {small_token} {lev.url} {db_url()}\n")
        while not os.path.exists("/tmp/lab_stop"):
            time.sleep(1)
    cleanup(lev)


if __name__ == "__main__":
    main()
