"""Issue 18: search while Lev is busy, this commit against the commit before the work (`OLD`), in the same run on
the same machine. The old commit's sources are exported with `git archive` and served by the virtualenv its own
Makefile builds (its own dependencies); both read the same database where they share a corpus.

Sections: the per-request fixed cost; the load mix (16 clients, 60 s, fresh stack each); search at 10k, 100k and
300k chunks of one user (the two servers up side by side on one database, c=1 requests alternating between them,
c=16 runs back to back in the order old, new, new, old); a small user's search in a database of 1,000 users.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from bench.common import ROOT, SCIFACT, Lev, cleanup, fmt_pct, own_python, pct, schema_seen_by, start_lev
from bench.latency import DROP, MODES, NOISE, WARMUP, Floor, db_url, perturb_text, rest_call
from bench.load import RAISED, _mixed_load
from bench.scifact import load_data
from tests.stack import LiveServer, new_user

OLD = os.environ.get("LEV_BENCH_OLD", "2963a26")  # main before issue 18
BASE_DOCS = 600  # SciFact documents embedded once (cached) and copied with perturbations to build the corpora
CACHE = Path("/tmp/lev-bench-cache")
QUIET = {"LEV_RATE_LIMITS": "off", "LEV_WORKERS_INLINE": "false"}
C1, C16_THREADS, C16_PER = 200, 16, 40
# LEV_BENCH_BUSY_SMOKE=1: a few-minute dry run of every step (small corpora, short load); its figures mean nothing
SMOKE = bool(os.environ.get("LEV_BENCH_BUSY_SMOKE"))
LOAD_SECONDS = 8 if SMOKE else 60
STAGES = (2_000, 4_000, 6_000) if SMOKE else (10_000, 100_000, 300_000)
if SMOKE:
    C1, C16_PER = 20, 5


def loadavg() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def cpu_gauge() -> float:
    """ms for a fixed pure-Python loop (best of 3): how fast this shared machine is at the moment, beside the load
    average (the same code took 140-160 ms on a quiet machine here and more when other tenants were busy)."""
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        sum(range(10**7))
        best = min(best, time.perf_counter() - t)
    return best * 1000


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Two load-mix runs of one side as one: latencies and counts pooled, memory peaks the larger."""
    lat: dict[str, list[float]] = {}
    for r in runs:
        for op, ms in r["lat"].items():
            lat.setdefault(op, []).extend(ms)
    errors: dict[str, int] = {}
    for r in runs:
        for k, v in r["errors"].items():
            errors[k] = errors.get(k, 0) + v
    fixed = {name: pct([x for r in runs for x in r["fixed"][name]["ms"]]) for name in runs[0]["fixed"]}
    return {"lat": lat, "errors": errors, "limited": sum(r["limited"] for r in runs),
            "elapsed": sum(r["elapsed"] for r in runs), "fixed": fixed,
            "rps": [sum(len(v) for v in r["lat"].values()) / r["elapsed"] for r in runs],
            "api_rss": max(r["api_rss"] for r in runs), "all_rss": max(r["all_rss"] for r in runs),
            "load": "; ".join(r["load"] for r in runs)}


def old_tree() -> Path:
    """The old commit's sources (git archive), cached per commit."""
    sha = subprocess.run(["git", "rev-parse", "--short", OLD], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    dest = Path(tempfile.gettempdir()) / f"lev-bench-old-{sha}"
    if not (dest / "lev" / "app.py").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def sides() -> dict[str, Path]:
    return {"old": old_tree(), "new": ROOT}


# ----------------------------------------------------------------------------- fixed cost
def fixed_cost(url: str, token: str, n: int = 300) -> dict[str, dict[str, Any]]:
    """c=1: an authenticated request whose own work is one tiny statement (the user's folder list, empty), and
    the unauthenticated /healthz (uvicorn and the outer middleware only)."""
    out = {}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
        for name, path in (("folders", "/api/v1/folders"), ("healthz", "/healthz")):
            for _ in range(30):
                c.get(path)
            ms = []
            for _ in range(n):
                t = time.perf_counter()
                r = c.get(path)
                ms.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.text
            out[name] = {**pct(ms), "ms": ms}
    return out


def fixed_cost_alternating(servers: dict[str, LiveServer], token: str, n: int = 300
                           ) -> dict[str, dict[str, dict[str, float]]]:
    """`fixed_cost` for servers side by side on one database, each request sent to every server in turn (order
    flipped each time), so a change in the machine's load falls on all of them alike."""
    clients = {k: httpx.Client(base_url=s.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
               for k, s in servers.items()}
    out: dict[str, dict[str, dict[str, float]]] = {k: {} for k in servers}
    for name, path in (("folders", "/api/v1/folders"), ("healthz", "/healthz")):
        ms: dict[str, list[float]] = {k: [] for k in servers}
        for c in clients.values():
            for _ in range(30):
                c.get(path)
        order = list(servers)
        for i in range(n):
            for k in (order if i % 2 == 0 else order[::-1]):
                t = time.perf_counter()
                r = clients[k].get(path)
                ms[k].append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.text
        for k in servers:
            out[k][name] = pct(ms[k])
    for c in clients.values():
        c.close()
    return out


# ----------------------------------------------------------------------------- load mix
def load_side(root: Path, base: list[tuple[str, list[str], np.ndarray]]) -> dict[str, Any]:
    import psycopg
    from pgvector.psycopg import register_vector

    lev = start_lev(RAISED, root=root, python=own_python(root))
    try:
        with psycopg.connect(db_url(), autocommit=True) as conn:  # 200 documents, as the load part ingests
            register_vector(conn)
            grow(conn, base[:200], [(lev.user_id, sum(len(b) for _, b, _ in base[:200]))], random.Random(1),
                 np.random.default_rng(1))
            conn.execute("ANALYZE")
        item_ids = [str(r[0]) for r in lev.admin.sql("SELECT id FROM user_items WHERE user_id = :u", u=lev.user_id)]
        fixed = fixed_cost(lev.url, lev.token)
        proc = psutil.Process(lev.server.proc.pid)  # type: ignore[union-attr]
        api_peak, all_peak = [proc.memory_info().rss], [proc.memory_info().rss]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                try:
                    own = proc.memory_info().rss
                    api_peak.append(own)
                    all_peak.append(own + sum(ch.memory_info().rss for ch in proc.children(recursive=True)))
                except psutil.Error:
                    pass
                time.sleep(0.5)

        threading.Thread(target=sample, daemon=True).start()
        load_before, gauge_before = loadavg(), cpu_gauge()
        started = time.monotonic()
        lat, errors, limited = _mixed_load(lev.url, lev.token, item_ids, started + LOAD_SECONDS)
        elapsed = time.monotonic() - started
        done.set()
    finally:
        cleanup(lev)
    return {"lat": lat, "errors": dict(errors), "limited": limited, "elapsed": elapsed, "fixed": fixed,
            "api_rss": max(api_peak) / 2**20, "all_rss": max(all_peak) / 2**20,
            "load": f"{load_before} → {loadavg()} (gauge {gauge_before:.0f} ms)"}


# ----------------------------------------------------------------------------- corpus
def base_corpus() -> list[tuple[str, list[str], np.ndarray]]:
    """(title, chunk bodies, their vectors) for the first BASE_DOCS SciFact documents, embedded once and cached."""
    from lev.embedding.embedder import LocalEmbedder
    from lev.ingest.chunking import chunk_text, embed_input

    corpus, _, _ = load_data(SCIFACT)
    docs = [(t, x) for t, x in list(corpus.values())[:BASE_DOCS] if x.strip()]
    chunked = [(t, chunk_text(x, t)) for t, x in docs]
    cache = CACHE / f"busy-base-{BASE_DOCS}.npy"
    if cache.exists():
        vectors = np.load(cache)
    else:
        vectors = np.asarray(LocalEmbedder().embed([embed_input(t, b) for t, bodies in chunked for b in bodies]),
                             dtype=np.float32)
        CACHE.mkdir(exist_ok=True)
        np.save(cache, vectors)
    out, i = [], 0
    for t, bodies in chunked:
        out.append((t, bodies, vectors[i:i + len(bodies)]))
        i += len(bodies)
    return out


def grow(conn: Any, base: list[tuple[str, list[str], np.ndarray]], targets: list[tuple[uuid.UUID, int]],
         rng: random.Random, nrng: np.random.Generator) -> int:
    """Give each user about its number of chunks more: perturbed copies of base documents (shuffled sentences,
    DROP of words dropped, vectors + N(0, NOISE²) renormalised), COPY'd 10k chunks per statement (the BM25
    triggers run per statement, as in production). Returns the chunks added."""
    contents, items, rows = [], [], []
    total = 0
    for user_id, chunks in targets:
        added, start = 0, rng.randrange(len(base))
        while added < chunks:
            title, bodies, vecs = base[start % len(base)]
            start += 1
            cid = uuid.uuid4()
            texts = [perturb_text(b, rng) for b in bodies]
            contents.append((cid, "text", title, "\n\n".join(texts)))
            items.append((uuid.uuid4(), user_id, cid, "text", title))
            noisy = vecs + nrng.standard_normal(vecs.shape).astype(np.float32) * NOISE
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
            for k, (t, e) in enumerate(zip(texts, noisy, strict=True)):
                rows.append((uuid.uuid4(), cid, k, title, t, e))
            added += len(bodies)
        total += added
    with conn.cursor() as cur:
        with cur.copy("COPY contents (id, kind, title, text) FROM STDIN") as cp:
            for r in contents:
                cp.write_row(r)
        with cur.copy("COPY user_items (id, user_id, content_id, kind, title) FROM STDIN") as cp:
            for r in items:
                cp.write_row(r)
        for i in range(0, len(rows), 10_000):
            with cur.copy("COPY chunks (id, content_id, ord, title, text, embedding) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(["uuid", "uuid", "int4", "text", "text", "vector"])
                for r in rows[i:i + 10_000]:
                    cp.write_row(r)
    return total


def other_users(conn: Any, lev: Lev, base: list[tuple[str, list[str], np.ndarray]], rng: random.Random,
                nrng: np.random.Generator) -> tuple[uuid.UUID, str]:
    """999 more users: one with 1,000 chunks, 998 with about 10 each. Returns the first's id and kb-only token."""
    small = new_user(lev.admin)
    tiny = [(uuid.uuid4(), f"b{i}@example.com", "pro") for i in range(998)]
    with conn.cursor() as cur:
        with cur.copy("COPY users (id, email, tier) FROM STDIN") as cp:
            for r in tiny:
                cp.write_row(r)
    grow(conn, base, [(small.id, 1000)] + [(uid, 10) for uid, _, _ in tiny], rng, nrng)
    return small.id, small.token(kb_only=True, name="small")


def reindex(conn: Any) -> float:
    """Rebuild the HNSW index and the statistics after a bulk load, then write everything the load left dirty
    to disk (a checkpoint, then the kernel's cache): the measurements that follow see the service on a settled
    database, not one still writing back a load of a gigabyte (200 MB/s of writes were seen going on into the
    first c=1 runs)."""
    t = time.perf_counter()
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute("CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)")
    conn.execute("VACUUM ANALYZE")
    conn.execute("CHECKPOINT")
    os.sync()
    return time.perf_counter() - t


# ----------------------------------------------------------------------------- measuring two servers
def c1_alternating(servers: dict[str, LiveServer], token: str, queries: list[str], mode: str,
                   floor: Floor | None = None) -> dict[str, dict[str, float]]:
    """c=1, each query sent to every server in turn (order flipped each query), keep-alive clients; with `floor`,
    the in-process floor takes its turn too, so service and floor are measured in the same moments."""
    clients = {k: httpx.Client(base_url=s.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
               for k, s in servers.items()}
    ms: dict[str, list[float]] = {k: [] for k in servers}
    for c in clients.values():
        for q in queries[:10]:
            rest_call(c, q, mode)
    order = [*servers, *(["floor"] if floor is not None else [])]
    for i, q in enumerate(queries):
        for k in (order if i % 2 == 0 else order[::-1]):
            if k == "floor" and floor is not None:
                floor(q)
                continue
            t = time.perf_counter()
            rest_call(clients[k], q, mode)
            ms[k].append((time.perf_counter() - t) * 1000)
    for c in clients.values():
        c.close()
    return {k: pct(v) for k, v in ms.items()}


def c16(url: str, token: str, queries: list[str], mode: str = "hybrid") -> dict[str, float]:
    ms: list[float] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
            for j in range(3):
                rest_call(c, queries[(i * 7 + j) % len(queries)], mode)
            mine = []
            for j in range(C16_PER):
                t = time.perf_counter()
                rest_call(c, queries[(i * C16_PER + j) % len(queries)], mode)
                mine.append((time.perf_counter() - t) * 1000)
            with lock:
                ms.extend(mine)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(C16_THREADS) as pool:
        list(pool.map(worker, range(C16_THREADS)))
    return {**pct(ms), "rps": len(ms) / (time.perf_counter() - t0)}


def both_servers(lev: Lev, nobatch: bool = False) -> dict[str, LiveServer]:
    """Old and new side by side; with `nobatch`, also the new code with query batching off (the A/B of batching)."""
    servers = {}
    for k, root in sides().items():  # old first, on the schema it knows (see schema_seen_by)
        with schema_seen_by(lev.admin, root):
            servers[k] = LiveServer(lev.data_dir, QUIET, log_name=f"bench-{k}", root=root).start(timeout=300)
    if nobatch:
        servers["nobatch"] = LiveServer(lev.data_dir, {**QUIET, "LEV_QUERY_BATCH_MAX": "1"}, log_name="bench-nobatch",
                                        ).start(timeout=300)
    return servers


def stop_all(servers: dict[str, LiveServer]) -> None:
    for s in servers.values():
        s.stop()


# ----------------------------------------------------------------------------- the part
def main() -> str:
    import psycopg
    from pgvector.psycopg import register_vector

    t_start = time.perf_counter()
    out: list[str] = [f"### Search while Lev is busy: this commit vs {OLD} (the commit before issue 18)", ""]
    lines = out.append
    lines(f"Old code: `git archive {OLD}` served by the virtualenv its own `make` builds (its own dependencies). "
          "Load average (1/5/15 min) is given at each step: the machine's 2 cores are shared with other sessions' "
          "test runs, so every comparison is made in the same run, side by side.")
    lines("")

    # 1. load mix and fixed cost, fresh stacks, in the order old, new, new, old (a drift in the machine's speed
    # falls on both sides alike)
    base = base_corpus()
    roots = sides()
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for k in ("old", "new", "new", "old"):
        runs[k].append(load_side(roots[k], base))
    load = {k: pooled(v) for k, v in runs.items()}
    lines(f"#### Load mix (16 clients, {LOAD_SECONDS} s, a fresh stack each time, in the order old, new, new, old)")
    lines("")
    lines("The load part's mix (25% REST search, 25% MCP search, 15% list, 15% get, 10% MCP list_recent, 10% "
          "ingest of a one-line note, each answered `ready`), hourly limits raised to 10M/h, on a library of 200 "
          "SciFact documents (copied in with SQL from the base corpus below, with their vectors). Each side's two "
          "runs are pooled; the CPU gauge is a fixed pure-Python loop timed before each run (best of 3; about "
          "150 ms on a quiet machine here), to show how fast this shared machine was at that moment.")
    lines("")
    lines("| measure | old | new | new/old |")
    lines("| --- | --- | --- | --- |")

    def total(k: str) -> float:
        return sum(len(v) for v in load[k]["lat"].values()) / load[k]["elapsed"]

    def ops(k: str, op: str) -> float:
        return len(load[k]["lat"].get(op, [])) / load[k]["elapsed"]

    lines(f"| throughput, req/s | {total('old'):.1f} | {total('new'):.1f} | {total('new') / total('old'):.2f} |")
    lines(f"| throughput of each run, req/s | {' and '.join(f'{x:.1f}' for x in load['old']['rps'])} | "
          f"{' and '.join(f'{x:.1f}' for x in load['new']['rps'])} | |")
    lines(f"| ingest throughput, ingests/s | {ops('old', 'rest ingest'):.2f} | {ops('new', 'rest ingest'):.2f} | "
          f"{ops('new', 'rest ingest') / max(ops('old', 'rest ingest'), 1e-9):.2f} |")
    for op in sorted(set(load["old"]["lat"]) | set(load["new"]["lat"])):
        o, n = pct(load["old"]["lat"][op]), pct(load["new"]["lat"][op])
        lines(f"| {op} p50 / p95 / p99 ms | {fmt_pct(o)} | {fmt_pct(n)} | {n['p95'] / o['p95']:.2f} (p95) |")
    lines(f"| errors (other than 429) / 429s | {load['old']['errors'] or 0} / {load['old']['limited']} | "
          f"{load['new']['errors'] or 0} / {load['new']['limited']} | |")
    lines(f"| peak RSS of the API process, MiB | {load['old']['api_rss']:.0f} | {load['new']['api_rss']:.0f} | |")
    lines(f"| peak RSS with its child processes, MiB | {load['old']['all_rss']:.0f} | {load['new']['all_rss']:.0f} "
          "| |")
    lines(f"| load average before → after, each run | {load['old']['load']} | {load['new']['load']} | |")
    lines("")
    lines("#### Per-request fixed cost (c=1, 300 requests after 30 warm-up on each load stack before its load; "
          "both stacks of a side pooled)")
    lines("")
    lines("| request | old p50 / p95 / p99 ms | new p50 / p95 / p99 ms |")
    lines("| --- | --- | --- |")
    for name, label in (("folders", "`GET /api/v1/folders` (auth, validation, one tiny statement, response)"),
                        ("healthz", "`GET /healthz` (uvicorn and the outer middleware only)")):
        lines(f"| {label} | {fmt_pct(load['old']['fixed'][name])} | {fmt_pct(load['new']['fixed'][name])} |")
    lines("")

    # 2. one growing database: one user at 10k, 100k, 300k chunks; then 1,000 users
    corpus, queries, qrels = load_data(SCIFACT)
    test = [queries[q] for q in qrels["test"] if q in queries]
    train = [queries[q] for q in qrels["train"] if q in queries]
    lev = start_lev(QUIET)
    rng, nrng = random.Random(18), np.random.default_rng(18)
    growth: dict[int, dict[str, Any]] = {}
    try:
        with psycopg.connect(db_url(), autocommit=True) as conn:
            register_vector(conn)
            have = 0
            for target in STAGES:
                conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
                t = time.perf_counter()
                have += grow(conn, base, [(lev.user_id, target - have)], rng, nrng)
                t_insert = time.perf_counter() - t
                if target == STAGES[2]:
                    _, small_token = other_users(conn, lev, base, rng, nrng)
                t_index = reindex(conn)
                n_chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]  # type: ignore[index]
                n_users = conn.execute("SELECT count(DISTINCT user_id) FROM user_items").fetchone()[0]  # type: ignore[index]
                servers = both_servers(lev, nobatch=target == STAGES[1])
                try:
                    stage: dict[str, Any] = {"chunks": n_chunks, "users": n_users, "insert_s": t_insert,
                                             "index_s": t_index, "load": loadavg(), "gauge": cpu_gauge()}
                    floors = {mode: Floor(lev, mode, test[-WARMUP:]) for mode in MODES} \
                        if target == STAGES[1] else {}
                    stage["hybrid"] = c1_alternating(servers, lev.token, test[:C1], "hybrid", floors.get("hybrid"))
                    if target == STAGES[1]:
                        pair = {k: servers[k] for k in ("old", "new")}
                        for mode in ("semantic", "keyword"):
                            stage[mode] = c1_alternating(pair, lev.token, test[:C1], mode, floors[mode])
                        stage["floors"] = {mode: f.result() for mode, f in floors.items()}
                        # before the c=16 runs: after them both codes measured 1.5 ms slower than on the load stacks
                        stage["fixed"] = fixed_cost_alternating(pair, lev.token)
                        q16 = (test + train)[:C16_THREADS * C16_PER]
                        runs: dict[str, list[dict[str, float]]] = {"old": [], "new": [], "nobatch": []}
                        for k in ("old", "new", "nobatch", "nobatch", "new", "old"):
                            runs[k].append(c16(servers[k].url, lev.token, q16))
                        stage["c16"] = runs
                    if target == STAGES[2]:
                        stage["small"] = c1_alternating(servers, small_token, test[:C1], "hybrid")
                    stage["load_after"] = loadavg()
                finally:
                    stop_all(servers)
                growth[target] = stage
    finally:
        cleanup(lev)

    lines("#### Search at 10k, 100k and 300k chunks of one user")
    lines("")
    lines(f"Corpus: the first {BASE_DOCS} SciFact documents ({sum(len(b) for _, b, _ in base):,} chunks, embedded "
          f"once) copied with perturbations into one user's library (sentences shuffled, {DROP:.0%} of words "
          f"dropped, vectors + N(0, {NOISE}²) renormalised; COPY with the BM25 triggers; HNSW rebuilt, VACUUM "
          "ANALYZE, CHECKPOINT and sync, so each stage is measured on a settled database). The database grows in "
          "place: 10k, then 100k, then 300k chunks; at 300k it also holds 999 "
          "other users (one with 1,000 chunks, 998 with about 10). Both servers run side by side on it without "
          f"inline workers; c=1: SciFact test claims, {C1} per cell, each claim sent to old and new in turn.")
    lines("")
    lines("| chunks (users) | mode | c | old p50 / p95 / p99 ms | new p50 / p95 / p99 ms | new/old p50 "
          "| load avg (CPU gauge) |")
    lines("| --- | --- | --- | --- | --- | --- | --- |")
    for st in growth.values():
        for mode in ("hybrid", "semantic", "keyword"):
            if mode in st:
                o, n = st[mode]["old"], st[mode]["new"]
                lines(f"| {st['chunks']:,} ({st['users']}) | {mode} | 1 | {fmt_pct(o)} | {fmt_pct(n)} | "
                      f"{n['p50'] / o['p50']:.2f} | {st['load']} → {st['load_after']} (gauge {st['gauge']:.0f} ms) |")
        if "c16" in st:
            for i in range(2):
                o, n = st["c16"]["old"][i], st["c16"]["new"][i]
                lines(f"| {st['chunks']:,} ({st['users']}) | hybrid | 16 (run {i + 1}) | {fmt_pct(o)} "
                      f"({o['rps']:.1f} req/s) | {fmt_pct(n)} ({n['rps']:.1f} req/s) | {n['rps'] / o['rps']:.2f} "
                      "(req/s) | |")
        if "small" in st:
            o, n = st["small"]["old"], st["small"]["new"]
            lines(f"| {st['chunks']:,} ({st['users']}) | hybrid, the user with 1,000 chunks | 1 | {fmt_pct(o)} | "
                  f"{fmt_pct(n)} | {n['p50'] / o['p50']:.2f} | |")
    st100 = growth[STAGES[1]]
    lines("")
    lines("Query batching A/B at 100k (the new code with `LEV_QUERY_BATCH_MAX=1`, a third server beside the two; "
          "c=1 alternating among the three, c=16 runs in the order old, new, off, off, new, old):")
    lines("")
    lines("| hybrid | batching on (16) | batching off (1) | on/off |")
    lines("| --- | --- | --- | --- |")
    on, off = st100["hybrid"]["new"], st100["hybrid"]["nobatch"]
    lines(f"| c=1 p50 / p95 / p99 ms | {fmt_pct(on)} | {fmt_pct(off)} | {on['p50'] / off['p50']:.2f} (p50) |")
    for i in range(2):
        on, off = st100["c16"]["new"][i], st100["c16"]["nobatch"][i]
        lines(f"| c=16 run {i + 1}: p50 / p95 / p99 ms (req/s) | {fmt_pct(on)} ({on['rps']:.1f}) | {fmt_pct(off)} "
              f"({off['rps']:.1f}) | {on['rps'] / off['rps']:.2f} (req/s) |")
    lines("")
    lines("Floors at 100k (in-process `store.search.search` + `LocalEmbedder.embed_query`, c=1, same claims, "
          "interleaved with the service calls: each claim goes to old, new and the floor in turn) and service/floor "
          "at p50:")
    lines("")
    lines("| mode | floor p50 / p95 / p99 ms | old service/floor | new service/floor |")
    lines("| --- | --- | --- | --- |")
    ratios = {}
    for mode in ("hybrid", "semantic", "keyword"):
        f = st100["floors"][mode]["total"]
        ro, rn = st100[mode]["old"]["p50"] / f["p50"], st100[mode]["new"]["p50"] / f["p50"]
        ratios[mode] = rn
        lines(f"| {mode} | {fmt_pct(f)} | {ro:.2f} | {rn:.2f} |")
    fx = st100["fixed"]
    lines("")
    lines("Fixed cost on the 100k database (`GET /api/v1/folders`, c=1, each request to old and new in turn, after "
          "the c=1 searches and before the c=16 runs): "
          f"old {fmt_pct(fx['old']['folders'])}, new {fmt_pct(fx['new']['folders'])} ms; "
          f"`/healthz` old {fmt_pct(fx['old']['healthz'])}, new {fmt_pct(fx['new']['healthz'])} ms.")
    lines("")
    lines("Corpus build: " + ", ".join(f"{st['chunks']:,} chunks insert {st['insert_s']:.0f} s + index "
                                       f"{st['index_s']:.0f} s" for st in growth.values()) + ".")
    lines("")

    # targets
    def mark(ok: bool) -> str:
        return "**holds**" if ok else "**missed**"

    n_load = load["new"]
    rest95, mcp95 = pct(n_load["lat"]["rest search"])["p95"], pct(n_load["lat"]["mcp search"])["p95"]
    h100 = st100["hybrid"]["new"]
    rps16 = min(r["rps"] for r in st100["c16"]["new"])
    small95 = growth[STAGES[2]]["small"]["new"]["p95"]
    lines("#### Targets (issue 18)")
    lines("")
    for label, ok in (
        (f"load mix REST search p95 ≤ 400 ms: {rest95:.0f} ms", rest95 <= 400),
        (f"load mix MCP search p95 ≤ 400 ms: {mcp95:.0f} ms", mcp95 <= 400),
        (f"load mix throughput ≥ 1.5× old: {total('new') / total('old'):.2f}×", total("new") >= 1.5 * total("old")),
        (f"load mix ingest throughput ≥ old: {ops('new', 'rest ingest'):.2f} vs {ops('old', 'rest ingest'):.2f}/s",
         ops("new", "rest ingest") >= ops("old", "rest ingest")),
        (f"hybrid c=16 ≥ 60 req/s at 100k: {rps16:.1f} (the slower of two runs)", rps16 >= 60),
        (f"hybrid REST c=1 at 100k p50 ≤ 30 ms: {h100['p50']:.1f}", h100["p50"] <= 30),
        (f"hybrid REST c=1 at 100k p95 ≤ 45 ms: {h100['p95']:.1f}", h100["p95"] <= 45),
        ("service/floor ≤ 1.3 at p50, all modes: " + ", ".join(f"{m} {r:.2f}" for m, r in ratios.items()),
         all(r <= 1.3 for r in ratios.values())),
        (f"fixed cost ≤ 3 ms (`GET /api/v1/folders` p50 at 100k): {fx['new']['folders']['p50']:.1f} ms",
         fx["new"]["folders"]["p50"] <= 3),
        (f"peak RSS of one API process ≤ 600 MiB (load mix): {n_load['api_rss']:.0f} MiB", n_load["api_rss"] <= 600),
        (f"small user's hybrid p95 ≤ 15 ms in the 1,000-user database: {small95:.1f} ms", small95 <= 15),
    ):
        lines(f"- {label} — {mark(ok)}")
    lines("")
    lines(f"Runtime {time.perf_counter() - t_start:.0f} s; load average at the end {loadavg()}.")
    return "\n".join(out)


if __name__ == "__main__":
    print(main())
