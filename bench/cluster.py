"""Cluster vs single process, same run, same machine: the load part's mix (16 clients) and sequential hybrid
searches, against one `lev serve` on the embedded stack and against `make cluster`'s topology (haproxy,
2 x `lev serve --no-workers-inline`, 2 x `lev worker`, PostgreSQL over TCP, Redis, S3)."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import cleanup, fmt_pct, pct, start_lev
from bench.corpus import documents
from bench.load import QUERIES, RAISED, _mixed_load

SECONDS = 45
HYBRID_QUERIES = 150


def _exercise(url: str, token: str) -> dict[str, object]:
    c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
    item_ids = []
    started = time.monotonic()
    for title, text in documents(200):
        r = c.post("/api/v1/ingest", json={"kind": "text", "title": title, "text": text, "auto_transform": False})
        r.raise_for_status()
        item_ids.append(r.json()["user_item_id"])
    ingest_s = time.monotonic() - started
    hybrid = []
    for i in range(HYBRID_QUERIES + 5):
        t = time.perf_counter()
        c.get("/api/v1/search", params={"q": QUERIES[i % len(QUERIES)] + f" {i}", "mode": "hybrid"}).raise_for_status()
        if i >= 5:
            hybrid.append((time.perf_counter() - t) * 1000)
    started = time.monotonic()
    lat, errors, limited = _mixed_load(url, token, item_ids, time.monotonic() + SECONDS)
    elapsed = time.monotonic() - started
    all_ms = [x for v in lat.values() for x in v]
    return {"ingest_s": ingest_s, "hybrid": pct(hybrid), "throughput": len(all_ms) / elapsed, "mixed": pct(all_ms),
            "search": pct(lat["rest search"] + lat["mcp search"]), "errors": sum(errors.values()) + limited}


def main() -> str:
    lev = start_lev(RAISED)
    try:
        single = _exercise(lev.url, lev.token)
    finally:
        cleanup(lev)
    from cluster.topology import Cluster

    base = Path(tempfile.mkdtemp(prefix="levbench-cluster-", dir="/tmp"))
    cluster = Cluster(base, extra_env={**RAISED, "LEV_LOG_LEVEL": "warning"})
    try:
        cluster.start()
        cluster.lev("user", "create", "bench@example.com", "--tier", "pro")
        token = cluster.lev("token", "create", "--user", "bench@example.com", "--name", "bench", "--write",
                            "--write-cap", "0")
        multi = _exercise(cluster.url, token)
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
    rows = []
    for name, r in (("single process (`lev serve`, embedded stack)", single),
                    ("cluster (haproxy, 2 API + 2 workers, PG/Redis/S3 servers)", multi)):
        rows.append(f"| {name} | {r['ingest_s']:.1f} | {fmt_pct(r['hybrid'])} | {r['throughput']:.1f} | "  # type: ignore[arg-type]
                    f"{fmt_pct(r['mixed'])} | {fmt_pct(r['search'])} | {r['errors']} |")  # type: ignore[arg-type]
    return (
        "Cluster vs single process in the same run on this 2-core machine. Each: 200 SciFact documents ingested "
        "sequentially (`kind: text`, no transforms), then "
        f"{HYBRID_QUERIES} sequential hybrid `GET /api/v1/search` (c=1), then the load part's mix from 16 client "
        f"threads for {SECONDS} s (hourly limits raised).\n\n"
        "| setup | ingest 200 docs s | hybrid c=1 p50 / p95 / p99 ms | mixed req/s (c=16) | mixed p50 / p95 / p99 ms "
        "| searches under load p50 / p95 / p99 ms | errors |\n| --- | --- | --- | --- | --- | --- | --- |\n"
        + "\n".join(rows) + "\n\n"
        "Both setups share the same 2 cores: the cluster runs four Lev processes, PostgreSQL, Redis, moto and "
        "haproxy on them, so it measures the cost of the topology (a balancer hop, TCP instead of Unix "
        "sockets, S3 instead of files), not its capacity; the capacity comes from putting the processes on "
        "separate machines (docs/scaling.md).\n"
    )
