"""Load: 16 concurrent clients for 60 s mixing REST and MCP searches, list, get and ingest; plus the list
benchmark of the foundation issue and the per-request cost of the limiter and the activity log."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil

from bench.common import cleanup, fmt_pct, pct, start_lev
from bench.corpus import documents

CLIENTS = 16
SECONDS = 60
RAISED = {"LEV_RATE_LIMITS": "on", "LEV_LIMIT_READ": "10000000/hour", "LEV_LIMIT_INGEST": "10000000/hour",
          "LEV_LIMIT_DELETE": "10000000/hour", "LEV_LIMIT_BULK": "10000000/hour",
          "LEV_LIMIT_MCP_WRITE": "10000000/hour"}
QUERIES = ["immune response to viral infection", "gene expression in tumour cells", "mitochondria membrane",
           "clinical trial mortality", "receptor signalling pathway", "vaccine antibody", "mouse model"]


def _mixed_load(url: str, token: str, item_ids: list[str], stop_at: float) -> tuple[dict[str, list[float]],
                                                                                     dict[str, int], int]:
    lat: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    limited = 0
    lock = threading.Lock()

    def worker(seed: int) -> None:
        nonlocal limited
        rnd = random.Random(seed)
        c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        while time.monotonic() < stop_at:
            roll = rnd.random()
            t = time.perf_counter()
            if roll < 0.25:
                op = "rest search"
                r = c.get("/api/v1/search", params={"q": rnd.choice(QUERIES),
                                                     "mode": rnd.choice(["hybrid", "semantic", "keyword"])})
            elif roll < 0.5:
                op = "mcp search"
                r = c.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "search_knowledge_base", "arguments": {"query": rnd.choice(QUERIES)}}})
            elif roll < 0.65:
                op = "rest list"
                r = c.get("/api/v1/items", params={"per_page": 100})
            elif roll < 0.8:
                op = "rest get"
                r = c.get(f"/api/v1/items/{rnd.choice(item_ids)}")
            elif roll < 0.9:
                op = "mcp list_recent"
                r = c.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                             "params": {"name": "list_recent", "arguments": {"limit": 20}}})
            else:
                op = "rest ingest"
                r = c.post("/api/v1/ingest", json={"kind": "text", "auto_transform": False,
                                                    "text": f"load note {uuid.uuid4()} about {rnd.choice(QUERIES)}"})
            ms = (time.perf_counter() - t) * 1000
            bad = r.status_code >= 400 or (op.startswith("mcp") and ("error" in r.json()
                                                                     or r.json()["result"].get("isError")))
            with lock:
                if r.status_code == 429:
                    limited += 1
                elif bad:
                    errors[op] += 1
                else:
                    lat[op].append(ms)

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(worker, range(CLIENTS)))
    return lat, errors, limited


def _list_benchmark(lev, n_items: int = 10_000) -> dict[str, float]:  # type: ignore[no-untyped-def]
    lev.admin.sql(
        "WITH c AS (INSERT INTO contents (id, kind, title, text) SELECT gen_random_uuid(), 'text', 'bulk ' || g, "
        "'bulk text ' || g FROM generate_series(1, :n) g RETURNING id) "
        "INSERT INTO user_items (id, user_id, content_id, kind, title, in_kb, archived) "
        "SELECT gen_random_uuid(), :u, c.id, 'text', 'bulk', true, false FROM c", n=n_items, u=lev.user_id)
    lev.admin.sql("ANALYZE user_items")
    c = httpx.Client(base_url=lev.url, headers=lev.headers(), timeout=60)
    for _ in range(10):
        c.get("/api/v1/items", params={"per_page": 100})
    times = []
    for page in range(1, 201):
        t = time.perf_counter()
        r = c.get("/api/v1/items", params={"per_page": 100, "page": page % 50 + 1})
        times.append((time.perf_counter() - t) * 1000)
        assert r.status_code == 200 and len(r.json()["items"]) == 100
    return pct(times)


def _overheads(lev) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Microseconds per call of the limiter check (one Redis round trip set) and of queueing an activity entry."""
    from lev.auth.policy import Principal
    from lev.core.clock import now
    from lev.core.settings import Settings
    from lev.limits.ratelimit import Limiter
    from lev.ops.activity import ActivityWriter
    from lev.store import db

    settings = Settings(rate_limits="on", limit_read="10000000/hour")
    from lev.embedded import redis_socket_path

    redis_url = f"unix://{redis_socket_path(lev.data_dir)}"

    async def go() -> tuple[float, float, float]:
        from redis.asyncio import Redis

        redis = Redis.from_url(redis_url)
        limiter = Limiter(settings, redis_url, redis, db.database())
        p = Principal(uuid.uuid4(), uuid.uuid4(), "b", frozenset({"read"}), True, frozenset(), True, 0, "pro")
        for _ in range(50):
            await limiter.check(p, "read")
        n = 1000
        t = time.perf_counter()
        for _ in range(n):
            await limiter.check(p, "read")
        lim_us = (time.perf_counter() - t) / n * 1e6
        writer = ActivityWriter(db.database())
        entry = {"ts": now(), "user_id": None, "token_id": None, "surface": "rest", "method": "GET /x",
                 "status": 200, "ip": "127.0.0.1", "user_agent": "b", "result_count": 1, "latency_ms": 1.0,
                 "query": None, "request_id": "r"}
        t = time.perf_counter()
        for _ in range(n):
            writer.record(dict(entry))
        rec_us = (time.perf_counter() - t) / n * 1e6
        t = time.perf_counter()
        written = await writer.flush()
        flush_us = (time.perf_counter() - t) / max(written, 1) * 1e6
        await redis.aclose()
        return lim_us, rec_us, flush_us

    return lev.admin.run_coro(go())


def main() -> str:
    lev = start_lev(RAISED)
    try:
        c = httpx.Client(base_url=lev.url, headers=lev.headers(), timeout=120)
        item_ids = []
        for title, text in documents(200):
            r = c.post("/api/v1/ingest", json={"kind": "text", "title": title, "text": text, "auto_transform": False})
            r.raise_for_status()
            item_ids.append(r.json()["user_item_id"])
        proc = psutil.Process(lev.server.proc.pid)  # type: ignore[union-attr]
        peak = [proc.memory_info().rss]
        stop_at = time.monotonic() + SECONDS
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                try:
                    peak.append(proc.memory_info().rss + sum(ch.memory_info().rss for ch in proc.children()))
                except psutil.Error:
                    pass
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        lat, errors, limited = _mixed_load(lev.url, lev.token, item_ids, stop_at)
        elapsed = time.monotonic() - started
        done.set()
        listing = _list_benchmark(lev)
        lim_us, rec_us, flush_us = _overheads(lev)
    finally:
        cleanup(lev)
    total = sum(len(v) for v in lat.values())
    rows = "\n".join(f"| {op} | {len(v)} | {fmt_pct(pct(v))} |" for op, v in sorted(lat.items()))
    all_ms = [x for v in lat.values() for x in v]
    err_txt = ", ".join(f"{k}: {v}" for k, v in errors.items()) or "0"
    return (
        f"{CLIENTS} client threads for {SECONDS} s on loopback against one `lev serve` (API and inline worker in "
        f"one process), hourly limits raised to 10M/h, after 200 documents were ingested. Mix: 25% REST search "
        f"(random mode), 25% MCP search, 15% REST list (per_page 100), 15% REST get, 10% MCP list_recent, "
        f"10% REST ingest.\n\n"
        f"Throughput {total / elapsed:.1f} requests/s ({total} ok in {elapsed:.0f} s); errors other than 429: "
        f"{err_txt}; 429s: {limited}; overall p99 {pct(all_ms)['p99']:.0f} ms; peak RSS of the server process "
        f"(API + worker) {max(peak) / 2**20:.0f} MiB.\n\n"
        "| operation | ok | p50 / p95 / p99 ms |\n| --- | --- | --- |\n" + rows + "\n\n"
        f"`GET /api/v1/items?per_page=100` over 10,200 items (10,000 inserted in SQL), 200 calls at concurrency 1: "
        f"p50 / p95 / p99 = {fmt_pct(listing)} ms (target p50 <= 15 ms: "
        f"{'holds' if listing['p50'] <= 15 else 'missed'}).\n\n"
        f"Per-request cost of the limiter and the activity log, measured in-process over 1000 calls: limiter "
        f"check (moving window on Redis, one class) {lim_us:.0f} µs; queueing an activity entry {rec_us:.1f} µs "
        f"on the request path; writing it later in a batch {flush_us:.0f} µs per entry (off the request path).\n"
    )

