"""One shard's vector side at growing size, for docs/scaling.md: storage per chunk, HNSW build time and the
nearest-neighbour query time that a hybrid search pays per shard.

Synthetic 384-dim unit vectors clustered like sentence embeddings (2,000 random topic centroids, each vector a
centroid plus noise, renormalised), in a scratch embedded PostgreSQL (pgserver: PostgreSQL 16, pgvector 0.6),
with the migration's index (`hnsw (embedding vector_cosine_ops)`, default m=16, ef_construction=64). Queries
are fresh vectors drawn the same way; timings are server-side (EXPLAIN ANALYZE execution time).

    python -m bench.shard 100000 300000
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

DIM = 384
CENTROIDS = 2000


def vectors(rng: np.random.Generator, centroids: np.ndarray, n: int) -> np.ndarray:
    picks = centroids[rng.integers(0, len(centroids), n)]
    v = picks + rng.normal(0, 0.035, (n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def measure(conn: psycopg.Connection, rng: np.random.Generator, centroids: np.ndarray, n: int) -> dict[str, float]:
    conn.execute("DROP TABLE IF EXISTS shard")
    conn.execute(f"CREATE TABLE shard (id bigserial PRIMARY KEY, embedding vector({DIM}) NOT NULL)")
    started = time.perf_counter()
    with conn.cursor().copy("COPY shard (embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["vector"])
        for start in range(0, n, 20000):
            for row in vectors(rng, centroids, min(20000, n - start)):
                copy.write_row([row])
    load = time.perf_counter() - started
    conn.execute("SET maintenance_work_mem = '2GB'")
    started = time.perf_counter()
    conn.execute("CREATE INDEX shard_hnsw ON shard USING hnsw (embedding vector_cosine_ops)")
    build = time.perf_counter() - started
    conn.execute("VACUUM ANALYZE shard")
    table_mb = conn.execute("SELECT pg_table_size('shard') / 1048576.0").fetchone()[0]  # type: ignore[index]
    index_mb = conn.execute("SELECT pg_relation_size('shard_hnsw') / 1048576.0").fetchone()[0]  # type: ignore[index]
    out = {"n": n, "load_s": load, "build_s": build, "table_mb": float(table_mb), "index_mb": float(index_mb)}
    queries = vectors(rng, centroids, 200)
    for ef, k in ((40, 10), (150, 100)):
        conn.execute(f"SET hnsw.ef_search = {ef}")
        times = []
        for q in queries:
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM shard ORDER BY embedding <=> %s "
                                f"LIMIT {k}", (q,)).fetchone()[0]  # type: ignore[index]
            times.append(plan[0]["Execution Time"])
        out[f"knn{k}_p50_ms"] = statistics.median(times)
        out[f"knn{k}_p95_ms"] = pct(times, 95)
    # recall@10 of the index against an exact scan, 50 queries
    conn.execute("SET hnsw.ef_search = 40")
    hits = 0
    for q in queries[:50]:
        approx = {r[0] for r in conn.execute("SELECT id FROM shard ORDER BY embedding <=> %s LIMIT 10", (q,))}
        exact = {r[0] for r in conn.execute("SELECT id FROM shard ORDER BY (embedding <=> %s) + 0 LIMIT 10", (q,))}
        hits += len(approx & exact)
    out["recall10"] = hits / 500
    return out


def main(sizes: list[int]) -> None:
    from lev.embedded import ensure_postgres

    data = Path(tempfile.mkdtemp(prefix="lev-shard-"))
    url = ensure_postgres(data).replace("postgresql+psycopg://", "postgresql://", 1)
    rng = np.random.default_rng(17)
    centroids = rng.normal(0, 1, (CENTROIDS, DIM)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        print("| chunks | table MB | HNSW MB | bytes/chunk (vector side) | load s | index build s | top-10 p50/p95 ms"
              " (ef 40) | top-100 p50/p95 ms (ef 150) | recall@10 |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for n in sizes:
            m = measure(conn, rng, centroids, n)
            per = (m["table_mb"] + m["index_mb"]) * 1048576 / n
            print(f"| {n:,} | {m['table_mb']:.0f} | {m['index_mb']:.0f} | {per:,.0f} | {m['load_s']:.0f} | "
                  f"{m['build_s']:.0f} | {m['knn10_p50_ms']:.1f} / {m['knn10_p95_ms']:.1f} | "
                  f"{m['knn100_p50_ms']:.1f} / {m['knn100_p95_ms']:.1f} | {m['recall10']:.3f} |", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100_000, 300_000])
