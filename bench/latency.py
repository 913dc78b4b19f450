"""Issue 8 item 3: search latency at >= 100k chunks, through REST and MCP, beside the in-process floor.

Corpus: SciFact ingested through `POST /api/v1/ingest` (as in bench/quality.py), then padded with perturbed
copies inserted directly with SQL as new content records + user items of the same user (see `pad()`), the
BM25 triggers maintaining postings and statistics, then ANALYZE.
"""

from __future__ import annotations

import math
import os
import random
import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import httpx
import numpy as np

from bench.common import SCIFACT, Lev, cleanup, fmt_pct, pct, start_lev
from bench.scifact import ingest_docs, load_data, store_search

TARGET_CHUNKS = 100_000
MODES = ("hybrid", "semantic", "keyword")
LIMIT = 10
C1_QUERIES = 300
C16_THREADS, C16_PER_THREAD = 16, 40
WARMUP = 20
NOISE = 0.02  # per-dimension Gaussian noise on the copies' unit embeddings (cosine to the source ~0.93)
DROP = 0.15  # share of words dropped from each copied sentence
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
SENTENCE = re.compile(r"(?<=[.!?])\s+")


# ----------------------------------------------------------------------------- corpus
def db_url() -> str:
    from lev.store import db

    url = db.database().engine.url.render_as_string(hide_password=False)
    return "postgresql://" + url.split("://", 1)[1]


def perturb_text(text: str, rng: random.Random) -> str:
    """Sentences in shuffled order, each with ~15% of its words dropped (so tf, dl and df all move)."""
    sentences = [s for s in SENTENCE.split(text) if s.strip()] or [text]
    rng.shuffle(sentences)
    out = []
    for s in sentences:
        words = s.split()
        kept = [w for w in words if rng.random() >= DROP] or words
        out.append(" ".join(kept))
    return " ".join(out)


def pad(lev: Lev, target: int) -> dict[str, Any]:
    """Insert perturbed copies of every ingested content until the library holds >= target chunks.

    Copy k of content C is a new `contents` row (kind text, same title) with a new `user_items` row of the
    bench user, and C's chunks re-inserted under it with perturbed text (perturb_text) and the embedding plus
    N(0, NOISE^2) per dimension, renormalised. Rows go in with COPY, 10k chunks per statement, so the
    statement-level BM25 triggers maintain lev_postings / lev_bm25_terms / lev_bm25_stats as in production.
    The HNSW index is dropped for the bulk load and rebuilt with the migration's definition (faster than
    10^5 incremental inserts); then ANALYZE.
    """
    import psycopg
    from pgvector.psycopg import register_vector

    t0 = time.perf_counter()
    with psycopg.connect(db_url(), autocommit=True) as conn:
        register_vector(conn)
        src = conn.execute("SELECT c.content_id, c.ord, c.title, c.text, c.embedding FROM chunks c "
                           "ORDER BY c.content_id, c.ord").fetchall()
        n = len(src)
        copies = max(0, math.ceil((target - n) / n))
        by_content: dict[uuid.UUID, list[tuple[Any, ...]]] = {}
        for row in src:
            by_content.setdefault(row[0], []).append(row)
        emb = np.array([np.asarray(r[4].to_numpy(), dtype=np.float32) for r in src])
        index_of = {(r[0], r[1]): i for i, r in enumerate(src)}
        rng, nrng = random.Random(8), np.random.default_rng(8)
        conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
        for _copy in range(copies):
            contents, items, batch = [], [], []
            for cid, rows in by_content.items():
                new_cid = uuid.uuid4()
                texts = [perturb_text(r[3], rng) for r in rows]
                title = rows[0][2]
                contents.append((new_cid, "text", title, "\n\n".join(texts)))
                items.append((uuid.uuid4(), lev.user_id, new_cid, "text", title))
                for r, t in zip(rows, texts, strict=True):
                    e = emb[index_of[(cid, r[1])]] + nrng.standard_normal(emb.shape[1]).astype(np.float32) * NOISE
                    e /= np.linalg.norm(e)
                    batch.append((uuid.uuid4(), new_cid, r[1], title, t, e))
            with conn.cursor() as cur:
                with cur.copy("COPY contents (id, kind, title, text) FROM STDIN") as cp:
                    for r in contents:
                        cp.write_row(r)
                with cur.copy("COPY user_items (id, user_id, content_id, kind, title) FROM STDIN") as cp:
                    for r in items:
                        cp.write_row(r)
                for i in range(0, len(batch), 10_000):  # one statement per 10k chunks: the triggers run per statement
                    with cur.copy("COPY chunks (id, content_id, ord, title, text, embedding) FROM STDIN "
                                  "(FORMAT BINARY)") as cp:
                        cp.set_types(["uuid", "uuid", "int4", "text", "text", "vector"])
                        for r in batch[i:i + 10_000]:
                            cp.write_row(r)
        t_insert = time.perf_counter() - t0
        t = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)")
        t_hnsw = time.perf_counter() - t
        conn.execute("VACUUM ANALYZE")
        stats = conn.execute(
            "SELECT s.n_chunks, (SELECT count(*) FROM chunks), (SELECT count(*) FROM lev_postings), "
            "(SELECT count(*) FROM lev_bm25_terms), (SELECT count(*) FROM user_items WHERE user_id = %s), "
            "pg_size_pretty(pg_total_relation_size('chunks')), pg_size_pretty(pg_total_relation_size('lev_postings')) "
            "FROM lev_bm25_stats s", (lev.user_id,)).fetchone()
    assert stats is not None
    return {"source_chunks": n, "copies": copies, "n_chunks": stats[1], "stats_chunks": stats[0],
            "postings": stats[2], "terms": stats[3], "items": stats[4], "chunks_size": stats[5],
            "postings_size": stats[6], "insert_s": t_insert, "hnsw_s": t_hnsw,
            "total_s": time.perf_counter() - t0}


# ----------------------------------------------------------------------------- clients
def rest_call(c: httpx.Client, q: str, mode: str) -> int:
    r = c.get("/api/v1/search", params={"q": q, "mode": mode, "limit": LIMIT})
    r.raise_for_status()
    return len(r.json()["results"])


def mcp_call(c: httpx.Client, q: str, mode: str) -> int:
    r = c.post("/api/mcp", headers=MCP_HEADERS, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "search_knowledge_base", "arguments": {"query": q, "mode": mode, "limit": LIMIT}}})
    r.raise_for_status()
    body = r.json()
    if "error" in body or body["result"].get("isError"):
        raise RuntimeError(f"MCP search failed: {str(body)[:300]}")
    return len(body["result"]["structuredContent"]["results"])


Call = Callable[[httpx.Client, str, str], int]


def measure(lev: Lev, call: Call, mode: str, queries: list[str], threads: int, per_thread: int) -> dict[str, float]:
    """Each thread: its own keep-alive client, `per_thread` sequential requests. Returns pct() + throughput."""
    ms: list[float] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        with httpx.Client(base_url=lev.url, headers=lev.headers(), timeout=120) as c:
            for j in range(3):  # connect + warm this client
                call(c, queries[(i * 7 + j) % len(queries)], mode)
            mine = []
            for j in range(per_thread):
                q = queries[(i * per_thread + j) % len(queries)]
                t = time.perf_counter()
                call(c, q, mode)
                mine.append((time.perf_counter() - t) * 1000)
            with lock:
                ms.extend(mine)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    wall = time.perf_counter() - t0
    return {**pct(ms), "rps": len(ms) / wall}


class Floor:
    """The in-process floor of one mode, one query per call: LocalEmbedder.embed_query, then store.search.search
    through lev.admin, each timed. A participant of its own, so it can be interleaved with service calls."""

    def __init__(self, lev: Lev, mode: str, warmup: list[str]) -> None:
        from lev.embedding.embedder import LocalEmbedder

        self.lev, self.mode, self.emb = lev, mode, LocalEmbedder()
        self.e_ms: list[float] = []
        self.s_ms: list[float] = []
        self.tot: list[float] = []
        for q in warmup:
            store_search(lev, q, self.emb.embed_query(q) if mode != "keyword" else None, mode, LIMIT)

    def __call__(self, q: str) -> None:
        t = time.perf_counter()
        vec = self.emb.embed_query(q) if self.mode != "keyword" else None
        t1 = time.perf_counter()
        store_search(self.lev, q, vec, self.mode, LIMIT)
        t2 = time.perf_counter()
        self.e_ms.append((t1 - t) * 1000)
        self.s_ms.append((t2 - t1) * 1000)
        self.tot.append((t2 - t) * 1000)

    def result(self) -> dict[str, dict[str, float]]:
        return {"embed": pct(self.e_ms), "sql": pct(self.s_ms), "total": pct(self.tot)}


def floor(lev: Lev, mode: str, queries: list[str]) -> dict[str, dict[str, float]]:
    """In-process: LocalEmbedder.embed_query (timed) + store.search.search through lev.admin (timed)."""
    f = Floor(lev, mode, queries[:WARMUP])
    for q in queries:
        f(q)
    return f.result()


def hnsw_recall(lev: Lev, queries: list[str], limit: int) -> dict[str, Any]:
    """Recall@limit of the semantic SQL on its HNSW path (ef_search as the planner sets it for `limit`) against
    the exact `ORDER BY distance + 0` over the same scope."""
    from sqlalchemy import text

    from lev.auth.policy import Scope
    from lev.core.settings import get_settings
    from lev.embedding.embedder import LocalEmbedder
    from lev.library.reads import search_params
    from lev.store import scoped_sql
    from lev.store import search as ss

    emb = LocalEmbedder()
    scope = Scope(lev.user_id, None, kb_only=True)
    p = search_params(get_settings())
    recalls, efs, ms_h, ms_e = [], set(), [], []

    async def one(s: Any, q: str, vec: list[float]) -> tuple[list[Any], list[Any], int, float, float]:
        plan = await ss.plan_scope(s, scope, None, limit, "semantic", p)
        assert plan.exact == "", "expected the HNSW path at this scale"
        ef = int((await s.execute(text("SHOW hnsw.ef_search"))).scalar_one())
        found = scoped_sql.item_sql(scope, None)
        item = found.sql
        params = {"qvec": vec, "limit": limit, **plan.bound(found)}
        t = time.perf_counter()
        h = [r.chunk_id for r in await s.execute(
            ss.with_vector(ss.SEMANTIC_SQL.format(nearest=replace(plan, fallback=None).nearest(":limit"),
                                                  item=item)), params)]
        t1 = time.perf_counter()
        e = [r.chunk_id for r in await s.execute(
            ss.with_vector(ss.SEMANTIC_SQL.format(nearest=replace(plan, exact="+ 0", fallback=None).nearest(":limit"),
                                                  item=item)), params)]
        t2 = time.perf_counter()
        return h, e, ef, (t1 - t) * 1000, (t2 - t1) * 1000

    for q in queries:
        vec = emb.embed_query(q)
        h, e, ef, th, te = lev.admin.run(lambda s, q=q, vec=vec: one(s, q, vec))
        recalls.append(len(set(h) & set(e)) / max(len(e), 1))
        efs.add(ef)
        ms_h.append(th)
        ms_e.append(te)
    return {"recall": float(np.mean(recalls)), "min": float(np.min(recalls)), "ef": sorted(efs),
            "hnsw_ms": pct(ms_h), "exact_ms": pct(ms_e), "n": len(queries)}


def estimate_cost(lev: Lev) -> float:
    """ms of the visible-chunk count the planner caches for 30 s per scope (store.search._scope_size)."""
    from lev.auth.policy import Scope
    from lev.store import scoped_sql

    scope = Scope(lev.user_id, None, kb_only=True)
    ms = []
    for _ in range(5):
        t = time.perf_counter()
        scope_in = scoped_sql.scope_sql(scope, None)
        lev.admin.sql(f"SELECT count(*) FROM chunks c WHERE c.content_id IN ({scope_in.sql})", **scope_in.params)
        ms.append((time.perf_counter() - t) * 1000)
    return float(np.median(ms))


# ----------------------------------------------------------------------------- the part
def main() -> str:
    t_start = time.perf_counter()
    corpus, queries, qrels = load_data(SCIFACT)
    test = [queries[q] for q in qrels["test"] if q in queries]
    train = [queries[q] for q in qrels["train"] if q in queries]
    c1_queries = test[:C1_QUERIES]
    c16_queries = (test + train)[:C16_THREADS * C16_PER_THREAD]
    lev = start_lev()
    try:
        t = time.perf_counter()
        _, ingest_s = ingest_docs(lev, corpus)
        corpus_info = pad(lev, TARGET_CHUNKS)
        t_corpus = time.perf_counter() - t

        t = time.perf_counter()
        rows: dict[tuple[str, str, int], dict[str, float]] = {}
        for mode in MODES:  # warm the server (model, caches, connections)
            measure(lev, rest_call, mode, test[-WARMUP:], 1, WARMUP)
        for surface, call in (("REST", rest_call), ("MCP", mcp_call)):
            for mode in MODES:
                rows[(surface, mode, 1)] = measure(lev, call, mode, c1_queries, 1, len(c1_queries))
                rows[(surface, mode, 16)] = measure(lev, call, mode, c16_queries, C16_THREADS, C16_PER_THREAD)
        t_service = time.perf_counter() - t
        t = time.perf_counter()
        floors = {mode: floor(lev, mode, c1_queries) for mode in MODES}
        recall10 = hnsw_recall(lev, test[:100], LIMIT)
        recall100 = hnsw_recall(lev, test[:100], 100)
        est_ms = estimate_cost(lev)
        t_floor = time.perf_counter() - t
    finally:
        cleanup(lev)

    ci = corpus_info
    lines = [
        "### Search latency at 100k chunks",
        "",
        f"Corpus: {ci['n_chunks']:,} chunks in {ci['items']:,} items of one user. SciFact ({len(corpus):,} docs, "
        f"{ci['source_chunks']:,} chunks) ingested through `POST /api/v1/ingest` in {ingest_s:.0f} s, then "
        f"{ci['copies']} perturbed copies of every content inserted directly with SQL (COPY) as new `contents` "
        f"rows + `user_items` of the same user: sentences shuffled and {DROP:.0%} of words dropped per copy (so "
        f"tf, dl, df and N all change), embeddings + N(0, {NOISE}²) per dimension, renormalised. The BM25 "
        f"triggers maintained {ci['postings']:,} postings over {ci['terms']:,} terms (stats row "
        f"{ci['stats_chunks']:,} chunks); the HNSW index was dropped for the load and rebuilt with the "
        f"migration's definition ({ci['hnsw_s']:.0f} s), then VACUUM ANALYZE. Padding took "
        f"{ci['total_s']:.0f} s; chunks {ci['chunks_size']}, postings {ci['postings_size']}.",
        "",
        f"Queries: SciFact test claims (c=1: {len(c1_queries)} sequential requests per cell; c=16: "
        f"{C16_THREADS} threads x {C16_PER_THREAD}, test then train claims), limit {LIMIT}, each thread its own "
        "httpx keep-alive client, 3 warm-up requests per client not timed. REST = `GET /api/v1/search`; MCP = "
        "`POST /api/mcp` `tools/call search_knowledge_base` (stateless JSON). Floor = the same store function "
        "in-process (`store.search.search` with `search_params(get_settings())` through `Lev.admin`) plus one "
        "`LocalEmbedder.embed_query` (not for keyword), each timed, c=1.",
        "",
        "| mode | surface | c | p50 / p95 / p99 ms | req/s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for mode in MODES:
        for c in (1, 16):
            for surface in ("REST", "MCP"):
                r = rows[(surface, mode, c)]
                lines.append(f"| {mode} | {surface} | {c} | {fmt_pct(r)} | {r['rps']:.1f} |")
        f = floors[mode]
        lines.append(f"| {mode} | floor: SQL in-process | 1 | {fmt_pct(f['sql'])} | |")
        if mode != "keyword":
            lines.append(f"| {mode} | floor: embed_query | 1 | {fmt_pct(f['embed'])} | |")
        lines.append(f"| {mode} | **floor: embed + SQL** | 1 | {fmt_pct(f['total'])} | |")
    lines += ["", "Targets at concurrency 1:", ""]
    h = rows[("REST", "hybrid", 1)]
    for label, ok in ((f"hybrid REST p50 <= 30 ms: {h['p50']:.1f} ms", h["p50"] <= 30),
                      (f"hybrid REST p95 <= 80 ms: {h['p95']:.1f} ms", h["p95"] <= 80)):
        lines.append(f"- {label} — **{'holds' if ok else 'missed'}**")
    for surface in ("REST", "MCP"):
        ratios = []
        for mode in MODES:
            r, f = rows[(surface, mode, 1)], floors[mode]["total"]
            ratios.append((mode, r["p50"] / f["p50"], r["p95"] / f["p95"]))
        ok = all(a <= 1.3 for _, a, _ in ratios)
        lines.append(f"- {surface} service/floor <= 1.3 (p50): "
                     + ", ".join(f"{m} {a:.2f} (p95 {b:.2f})" for m, a, b in ratios)
                     + f" — **{'holds' if ok else 'missed'}**")
    lines += [
        "",
        f"HNSW recall against exact search (semantic SQL, {recall10['n']} test claims, the planner's ef_search, "
        f"exact = `ORDER BY distance + 0` over the same scope): recall@{LIMIT} = {recall10['recall']:.3f} "
        f"(min {recall10['min']:.2f}) at ef_search {recall10['ef']}; the hybrid's vector leg (top 100) "
        f"recall@100 = {recall100['recall']:.3f} (min {recall100['min']:.2f}) at ef_search {recall100['ef']}. "
        f"SQL time HNSW vs exact scan: {fmt_pct(recall10['hnsw_ms'])} vs {fmt_pct(recall10['exact_ms'])} ms "
        f"(limit {LIMIT}).",
        "",
        f"Chunk-estimate cache: the planner counts the scope's visible chunks ({est_ms:.0f} ms at this size) to "
        "choose exact scan vs HNSW and per-candidate probing vs filtering first, and caches it per scope for 30 s, "
        "in each process; so roughly one request per scope per 30 s pays it (it lands in p99 at most; the floor "
        "pays it too, in its own process). For hybrid and semantic the service embeds the query while the "
        "database works (planning, keyword candidates), so its time can be below the sequential floor.",
        "",
        f"Runtime: corpus {t_corpus:.0f} s, service runs {t_service:.0f} s, floor + recall {t_floor:.0f} s; "
        f"total {time.perf_counter() - t_start:.0f} s. Load average at the end (1/5/15 min): "
        + " / ".join(f"{x:.1f}" for x in os.getloadavg()) + " (other work on the machine shows here).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
