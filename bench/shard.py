"""One shard's vector side at growing size, for docs/scaling.md: storage per chunk, HNSW build time and the
nearest-neighbour query time that a hybrid search pays per shard.

Synthetic 384-dim unit vectors clustered like sentence embeddings (2,000 random topic centroids, each vector a
centroid plus noise, renormalised), in a scratch embedded PostgreSQL (a new data directory's: PostgreSQL 18,
pgvector 0.8) with the migration's index (`hnsw (embedding vector_cosine_ops)`, default m=16,
ef_construction=64). Queries are fresh vectors drawn the same way; timings are server-side (EXPLAIN ANALYZE
execution time). An `owner` column places one user's library inside the shard (500, 2,000 and 5,000 chunks)
to time the exact scan that the planner uses for a scope of up to 5,000 chunks.

    python -m bench.shard 100000 300000
    python -m bench.shard 1000000       # about 25 minutes here (4 GB maintenance_work_mem for the build)
"""

from __future__ import annotations

import atexit
import shutil
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


def owner_of(i: int) -> int:
    """Rows 0-499 belong to user 0, the next 2,000 to user 1, the next 5,000 to user 2, the rest to users of 200."""
    if i < 500:
        return 0
    if i < 2500:
        return 1
    if i < 7500:
        return 2
    return 3 + (i - 7500) // 200


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def measure(conn: psycopg.Connection, rng: np.random.Generator, centroids: np.ndarray, n: int) -> dict[str, float]:
    conn.execute("DROP TABLE IF EXISTS shard")
    conn.execute(f"CREATE TABLE shard (id bigserial PRIMARY KEY, owner int NOT NULL, embedding vector({DIM}) NOT NULL)")
    started = time.perf_counter()
    with conn.cursor().copy("COPY shard (owner, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "vector"])
        for start in range(0, n, 20000):
            for k, row in enumerate(vectors(rng, centroids, min(20000, n - start))):
                copy.write_row([owner_of(start + k), row])
    load = time.perf_counter() - started
    print(f"{n:,}: loaded in {load:.0f} s; building the index", file=sys.stderr, flush=True)
    # the whole graph in memory while it is built (1 M chunks need more than 2 GB, or the build crawls)
    conn.execute(f"SET maintenance_work_mem = '{2 if n <= 500_000 else 4}GB'")
    started = time.perf_counter()
    conn.execute("CREATE INDEX shard_hnsw ON shard USING hnsw (embedding vector_cosine_ops)")
    build = time.perf_counter() - started
    print(f"{n:,}: index built in {build:.0f} s; querying", file=sys.stderr, flush=True)
    conn.execute("CREATE INDEX shard_owner ON shard (owner)")
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
    # one user's library inside the shard: exact scan of just their chunks (the planner's choice up to 5,000)
    for owner, size in ((0, 500), (1, 2000), (2, 5000)):
        times = []
        for q in queries[:100]:
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM shard WHERE owner = %s "
                                "ORDER BY (embedding <=> %s) + 0 LIMIT 100", (owner, q)).fetchone()[0]  # type: ignore[index]
            times.append(plan[0]["Execution Time"])
        out[f"user{size}_p50_ms"] = statistics.median(times)
        out[f"user{size}_p95_ms"] = pct(times, 95)
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
    atexit.register(shutil.rmtree, data, True)  # runs after the embedded package's own exit hook has stopped the server
    url = ensure_postgres(data).replace("postgresql+psycopg://", "postgresql://", 1)
    rng = np.random.default_rng(17)
    centroids = rng.normal(0, 1, (CENTROIDS, DIM)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        print("| chunks | table MB | HNSW MB | bytes/chunk (vector side) | load s | index build s | top-10 p50/p95 ms"
              " (ef 40) | top-100 p50/p95 ms (ef 150) | recall@10 | one user's 500 / 2,000 / 5,000 chunks, exact"
              " top-100 p50 (p95) ms |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for n in sizes:
            m = measure(conn, rng, centroids, n)
            per = (m["table_mb"] + m["index_mb"]) * 1048576 / n
            print(f"| {n:,} | {m['table_mb']:.0f} | {m['index_mb']:.0f} | {per:,.0f} | {m['load_s']:.0f} | "
                  f"{m['build_s']:.0f} | {m['knn10_p50_ms']:.1f} / {m['knn10_p95_ms']:.1f} | "
                  f"{m['knn100_p50_ms']:.1f} / {m['knn100_p95_ms']:.1f} | {m['recall10']:.3f} | "
                  f"{m['user500_p50_ms']:.1f} ({m['user500_p95_ms']:.1f}) / {m['user2000_p50_ms']:.1f} "
                  f"({m['user2000_p95_ms']:.1f}) / {m['user5000_p50_ms']:.1f} ({m['user5000_p95_ms']:.1f}) |",
                  flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100_000, 300_000])
