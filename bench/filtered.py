"""Issue 49: filtered searches walk the index (pgvector 0.8's iterative scans) and keep their recall and speed.

One user's library of CHUNKS chunks (busy's corpus: SciFact copied with perturbations, real MiniLM vectors) on a
fresh embedded stack, with three folders holding about 0.5 %, 5 % and 50 % of the chunks (items drawn at random).
Each SciFact test claim is searched in turn unfiltered and in each folder, semantic and hybrid, limit 10, by
Lev's own search statement in process (`lev.store.search.search`: the statement the API runs, without the HTTP
around it), order rotated per claim. Recall@10 is against the same search with an exact vector side (every
scope scanned exactly: the same statement with `exact_scan_max_chunks` above the library's size).

    python -m bench.filtered          # builds the library once under LEV_BENCH_FILTERED_DIR, then measures
    LEV_BENCH_FILTERED_CHUNKS=20000   # a smaller library

The goal (issue 49): recall@10 >= 0.98 in each folder, p95 <= 1.2x the unfiltered search's, every answer full.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.busy import base_corpus, grow, reindex
from bench.common import SCIFACT, commit, machine, pct
from bench.scifact import load_data

CHUNKS = int(os.environ.get("LEV_BENCH_FILTERED_CHUNKS", 100_000))
DATA = Path(os.environ.get("LEV_BENCH_FILTERED_DIR", f"/tmp/lev-bench-filtered-{CHUNKS}"))
SHARES = (0.005, 0.05, 0.5)
CLAIMS = int(os.environ.get("LEV_BENCH_FILTERED_CLAIMS", 200))
MODES = ("semantic", "hybrid")


def build(url: str) -> dict[str, Any]:
    """The library and its folders (once: a directory that has them is reused)."""
    import psycopg
    from pgvector.psycopg import register_vector

    marker = DATA / "library.json"
    if marker.exists():
        return dict(json.loads(marker.read_text()))
    plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    user_id = uuid.uuid4()
    with psycopg.connect(plain, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("INSERT INTO users (id, email, tier) VALUES (%s, 'filtered@example.com', 'pro')", (user_id,))
        conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
        grow(conn, base_corpus(), [(user_id, CHUNKS)], random.Random(49), np.random.default_rng(49))
        reindex(conn)
        items = conn.execute("SELECT u.id, count(c.id) FROM user_items u JOIN chunks c ON c.content_id = u.content_id"
                             " WHERE u.user_id = %s GROUP BY u.id ORDER BY u.id", (user_id,)).fetchall()
        total = sum(n for _, n in items)
        folders = {}
        rng = random.Random(7)
        for share in SHARES:
            fid = uuid.uuid4()
            conn.execute("INSERT INTO folders (id, user_id, name) VALUES (%s, %s, %s)", (fid, user_id, f"{share:g}"))
            picked, have = [], 0
            for item_id, n in rng.sample(items, len(items)):
                if have >= share * total:
                    break
                picked.append((item_id, fid))
                have += n
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO item_folders (item_id, folder_id) VALUES (%s, %s)", picked)
            folders[f"{share:g}"] = {"id": str(fid), "chunks": have}
        conn.execute("VACUUM ANALYZE")
    library = {"user_id": str(user_id), "chunks": total, "folders": folders}
    marker.write_text(json.dumps(library))
    return library


async def measure(url: str, library: dict[str, Any]) -> dict[str, Any]:
    from lev.core.settings import get_settings
    from lev.embedding.embedder import LocalEmbedder
    from lev.library.reads import search_params
    from lev.store import db, search
    from lev.store.filters import Filters
    from lev.store.scope import Scope

    _, queries, qrels = load_data(SCIFACT)
    claims = [queries[q] for q in sorted(qrels["test"])][:CLAIMS]
    vectors = LocalEmbedder().embed_queries(claims)
    database = db.init_engine(url, pool_size=2)
    params = search_params(get_settings())
    exact = replace(params, exact_scan_max_chunks=10**9)
    scope = Scope(uuid.UUID(library["user_id"]), None, True)
    scopes: dict[str, Filters | None] = {"none": None, **{
        share: Filters(folder_id=uuid.UUID(f["id"])) for share, f in library["folders"].items()}}

    async def run(mode: str, f: Filters | None, i: int, p: Any) -> tuple[float, dict[str, float]]:
        t = time.perf_counter()
        async with database.read_session() as s:
            hits = await search.search(s, scope, query=claims[i], query_vector=vectors[i], mode=mode, limit=10,
                                       params=p, filters=f)
        return (time.perf_counter() - t) * 1000, {h["chunk_id"]: h["score"] for h in hits}

    out: dict[str, Any] = {}
    for mode in MODES:
        ms: dict[str, list[float]] = {k: [] for k in scopes}
        recall: dict[str, list[float]] = {k: [] for k in scopes}
        tied: dict[str, list[float]] = {k: [] for k in scopes}
        short: dict[str, int] = dict.fromkeys(scopes, 0)
        for i in range(min(20, len(claims))):  # warm-up: plans prepared, pages cached
            for f in scopes.values():
                await run(mode, f, i, params)
        keys = list(scopes)
        for i in range(len(claims)):
            order = keys[i % len(keys):] + keys[:i % len(keys)]
            for k in order:
                took, ids = await run(mode, scopes[k], i, params)
                ms[k].append(took)
                _, truth = await run(mode, scopes[k], i, exact)
                recall[k].append(len(ids.keys() & truth.keys()) / max(len(truth), 1))
                # a copy of a chunk that scores as the exact answer's last (within float4 noise) is as near
                last = min(truth.values(), default=0.0)
                tied[k].append(sum(1 for c, v in ids.items() if c in truth or v >= last - 1e-6) / max(len(truth), 1))
                short[k] += len(ids) < min(10, len(truth))
        out[mode] = {k: {**pct(ms[k]), "recall": float(np.mean(recall[k])), "tied": float(np.mean(tied[k])),
                         "short": short[k]} for k in scopes}
    await db.dispose_engine()
    return out


def table(library: dict[str, Any], result: dict[str, Any], engine: str) -> str:
    lines = [f"{engine}; {library['chunks']:,} chunks; {CLAIMS} SciFact test claims, semantic and hybrid, limit 10, "
             "in process. p50 / p95 ms; x = p95 over the unfiltered p95; recall@10 against the exact vector side, by "
             "chunk id and counting ties (a hit scoring at least the exact answer's 10th: the corpus holds perturbed "
             "copies of each chunk, nearly equidistant).",
             "", "| mode | scope | chunks in scope | p50 | p95 | x | recall@10 (ids) | recall@10 (ties) | short |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for mode, rows in result.items():
        base = rows["none"]["p95"]
        for k, r in rows.items():
            n = library["chunks"] if k == "none" else library["folders"][k]["chunks"]
            name = "unfiltered" if k == "none" else f"folder, {float(k) * 100:g} %"
            lines.append(f"| {mode} | {name} | {n:,} | {r['p50']:.1f} | {r['p95']:.1f} | {r['p95'] / base:.2f} | "
                         f"{r['recall']:.3f} | {r['tied']:.3f} | {r['short']} |")
    return "\n".join(lines)


def main() -> str:
    from lev.embedded import ensure_postgres
    from lev.store import db

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    DATA.mkdir(parents=True, exist_ok=True)
    url = ensure_postgres(DATA)
    db.migrate(url)
    t = time.perf_counter()
    library = build(url)
    print(f"library ready in {time.perf_counter() - t:.0f} s: {library}", file=sys.stderr)
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        row = conn.execute("SELECT current_setting('server_version'), (SELECT extversion FROM pg_extension"
                           " WHERE extname = 'vector')").fetchone()
    assert row is not None
    engine = f"PostgreSQL {row[0]}, pgvector {row[1]}"
    result = asyncio.run(measure(url, library))
    report = f"{machine()}; commit {commit()}\n\n" + table(library, result, engine)
    print(report)
    return report


if __name__ == "__main__":
    main()
