"""`make bench-automation`: feeds, webhooks and the idle log, this commit against the commit before issue 40, in one
run on loopback stand-ins (each side a fresh stack; the old one is `git archive` of its commit in the virtualenv its
own Makefile builds).

1. Idle log: lines `lev serve` writes in a minute with nothing to do (its output is a file, as under a supervisor).
2. Webhooks: `item.ready` from the ingest's answer to a loopback receiver (60 text ingests one after another),
   p50/p95/p99; 1,000 deliveries written to the outbox at once: deliveries per second and the server's CPU per
   delivery.
3. Feeds: 1,000 followed feeds checked with nothing new (each answers 304 to its ETag): polls per second, the
   server's CPU per poll (a round with nothing else running), and the p95 of searches run during a second round
   beside the same searches with nothing polling (the searching client is a process of its own, apart from the
   stand-in feed server's threads).
4. The small user (issue 18's benchmark): `make bench-busy`'s database of 1,000 users (312k chunks; one user with
   1,000), old and new servers on it side by side, 200 SciFact claims sent to each in turn (hybrid, c=1).

CPU is the `lev serve` process's (API and inline worker, user + system, with any child) and, apart, the embedded
PostgreSQL's. `LEV_BENCH_SIDES=new` (or `old`) runs one side; `LEV_BENCH_AUTOMATION=webhooks,feeds` some parts
(`log`, `webhooks`, `feeds`, `search`; the last builds its database for about 10 minutes).
The load average (1 min) is written when each part starts: above 1.5 the machine was not quiet. One command runs
it all: `make bench-automation` (the SciFact files from `LEV_BENCH_SCIFACT`, default ../shared/bench/scifact).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from bench.common import ROOT, SCIFACT, cleanup, fmt_pct, own_python, pct, schema_seen_by, start_lev
from tests.fixtures_feeds import FeedSite, WebhookReceiver

OLD = os.environ.get("LEV_BENCH_AUTOMATION_OLD", "ab12759")  # main before issue 40
FEEDS = 1000
BURST = 1000
LATENCY_INGESTS = 60
IDLE_SEC = 60
QUIET_LOAD = 1.5
QUERIES = ["volcanoes and magma", "sourdough starter", "quantum entanglement", "tide pools", "bridge design"]


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


def load(settle_sec: float = 180) -> float:
    """The 1-minute load average once it is under QUIET_LOAD (waiting up to `settle_sec` for the last part's
    processes to be forgotten), else as it is then."""
    deadline = time.monotonic() + settle_sec
    while os.getloadavg()[0] > QUIET_LOAD and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


class Cpu:
    """CPU seconds (user + system) of the server process with its children, and of the embedded PostgreSQL."""

    def __init__(self, pid: int, data_dir: Path) -> None:
        self.pid = pid
        self.pg_dir = str(data_dir)

    def _sum(self, procs: list[psutil.Process]) -> float:
        total = 0.0
        for p in procs:
            try:
                total += sum(p.cpu_times()[:2])
            except psutil.NoSuchProcess:
                pass
        return total

    def server(self) -> float:
        proc = psutil.Process(self.pid)
        return self._sum([proc, *proc.children(recursive=True)])

    def postgres(self) -> float:
        procs = []
        for p in psutil.process_iter(["name", "cmdline"]):
            try:
                if (p.info["name"] or "").startswith("postgres") and self.pg_dir in " ".join(p.info["cmdline"] or []):
                    procs.append(p)
                    procs.extend(p.children(recursive=True))
            except psutil.NoSuchProcess:
                pass
        return self._sum(procs)

    def both(self) -> tuple[float, float]:
        return self.server(), self.postgres()


def _search_child(url: str, headers: dict[str, str], stop: Any, out: Any) -> None:
    """Searches back to back until `stop` is set, in a process of its own (not sharing a GIL with the stand-ins);
    their latencies in ms go to `out` at the end."""
    ms: list[float] = []
    with httpx.Client(base_url=url, headers=headers, timeout=120) as c:
        while not stop.is_set():
            started = time.perf_counter()
            c.get("/api/v1/search", params={"q": QUERIES[len(ms) % len(QUERIES)], "limit": 10})
            ms.append((time.perf_counter() - started) * 1000)
    out.put(ms)


class Searches:
    """A client searching back to back from a child process while the block runs."""

    def __init__(self, lev: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.stop, self.out = ctx.Event(), ctx.Queue()
        self.proc = ctx.Process(target=_search_child, args=(lev.url, lev.headers(), self.stop, self.out))
        self.ms: list[float] = []

    def __enter__(self) -> Searches:
        self.proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.ms = self.out.get(timeout=300)
        self.proc.join(60)


def _timed_searches(lev: Any, seconds: float) -> list[float]:
    with Searches(lev) as searches:
        time.sleep(seconds)
    return searches.ms


def idle_part(lev: Any) -> dict[str, Any]:
    time.sleep(5)  # start-up lines (the banner, the first cron runs) are not idle
    path = lev.server.log_path
    before = path.read_bytes().count(b"\n")
    time.sleep(IDLE_SEC)
    lines = path.read_bytes().splitlines()[before:]
    return {"lines": len(lines), "sample": [x.decode(errors="replace")[:160] for x in lines[:3]]}


def webhooks_part(lev: Any, c: httpx.Client, cpu: Cpu) -> dict[str, Any]:
    receiver = WebhookReceiver()
    try:
        hook = c.post("/api/v1/webhooks", json={"url": receiver.url, "events": ["item.ready"]}).json()
        latencies = []
        for n in range(LATENCY_INGESTS):
            r = c.post("/api/v1/ingest", json={"kind": "text", "text": f"Latency note {n} about kestrels.",
                                               "auto_transform": False})
            answered = time.time()
            assert r.status_code == 200, r.text
            got = receiver.wait_for(lambda ds, k=n: len(ds) == k + 1, timeout=60)
            latencies.append((got[-1].at - answered) * 1000)
        before = len(receiver.deliveries)
        event_rows = ", ".join(
            f"('msg_bench{n:04d}', '{lev.user_id}', 'item.ready', "
            f"'{{\"type\": \"item.ready\", \"timestamp\": \"2026-01-01T00:00:00Z\", \"data\": {{\"n\": {n}}}}}')"
            for n in range(BURST))
        cpu0 = cpu.both()
        lev.admin.sql(f"INSERT INTO webhook_events (id, user_id, type, payload) VALUES {event_rows}; "
                      "INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts) "
                      f"SELECT gen_random_uuid(), '{hook['id']}', id, 'pending', 0 FROM webhook_events "
                      "WHERE id LIKE 'msg_bench%'")
        got = receiver.wait_for(lambda ds: len(ds) >= before + BURST, timeout=900)
        deadline = time.monotonic() + 120  # the outcomes recorded too
        while lev.admin.sql("SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'")[0][0]:
            assert time.monotonic() < deadline, "the deliveries' outcomes were not recorded"
            time.sleep(0.2)
        server, pg = (b - a for a, b in zip(cpu0, cpu.both(), strict=True))
        batch = got[before:]
        span = batch[-1].at - batch[0].at
        return {"latency": pct(latencies), "span": span, "rate": BURST / span, "cpu": server / BURST * 1000,
                "pg": pg / BURST * 1000, "received": len(receiver.deliveries) - before}
    finally:
        receiver.close()


def _wait_checked(lev: Any) -> None:
    deadline = time.monotonic() + 900
    while lev.admin.sql("SELECT count(*) FROM feeds WHERE last_checked_at IS NULL")[0][0] > 0:
        assert time.monotonic() < deadline, "the polls did not finish in 15 minutes"
        time.sleep(0.5)


def feeds_part(lev: Any, c: httpx.Client, cpu: Cpu) -> dict[str, Any]:
    site = FeedSite()
    try:
        for n in range(FEEDS):
            site.add(f"b{n}", "rss", [])
        rows = ", ".join(f"('{uuid.uuid4()}', '{lev.user_id}', '{site.url}/feeds/b{n}', 'Feed {n}', false, 0, "
                         f"'\"v0\"', now() + interval '1 hour', 0)" for n in range(FEEDS))
        lev.admin.sql("INSERT INTO feeds (id, user_id, url, feed_title, paused, failures, etag, next_poll_at, "
                      f"entries_ingested) VALUES {rows}")
        idle = _timed_searches(lev, 20)
        # first alone (CPU and rate of the polls only), then again with a client searching back to back
        cpu0 = cpu.both()
        lev.admin.sql("UPDATE feeds SET next_poll_at = now(), last_checked_at = NULL")  # due: the next tick
        _wait_checked(lev)
        server, pg = (b - a for a, b in zip(cpu0, cpu.both(), strict=True))
        first, last = lev.admin.sql("SELECT min(last_checked_at), max(last_checked_at) FROM feeds")[0]
        span = (last - first).total_seconds()
        with Searches(lev) as during:
            lev.admin.sql("UPDATE feeds SET next_poll_at = now(), last_checked_at = NULL")
            _wait_checked(lev)
        return {"span": span, "rate": FEEDS / span, "cpu": server / FEEDS * 1000, "pg": pg / FEEDS * 1000,
                "not_modified": sum(1 for _, status, _ in site.hits if status == 304),
                "failed": lev.admin.sql("SELECT count(*) FROM feeds WHERE failures > 0")[0][0],
                "idle": pct(idle), "during": pct(during.ms)}
    finally:
        site.close()


def search_part(sides: list[str]) -> dict[str, Any]:
    """The small user's hybrid latency on old and new servers sharing one large database."""
    import psycopg
    from pgvector.psycopg import register_vector

    from bench.busy import C1, QUIET, base_corpus, c1_alternating, grow, other_users, reindex
    from bench.latency import db_url
    from bench.scifact import load_data
    from tests.stack import LiveServer

    _, queries, qrels = load_data(SCIFACT)
    test = [queries[q] for q in qrels["test"] if q in queries][:C1]
    base = base_corpus()
    lev = start_lev(QUIET)
    servers: dict[str, LiveServer] = {}
    try:
        rng, nrng = random.Random(18), np.random.default_rng(18)
        with psycopg.connect(db_url(), autocommit=True) as conn:
            register_vector(conn)
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
            grow(conn, base, [(lev.user_id, 300_000)], rng, nrng)
            _, token = other_users(conn, lev, base, rng, nrng)
            reindex(conn)
        started = load()
        for k in sides:
            root = old_tree() if k == "old" else ROOT
            with schema_seen_by(lev.admin, root):
                servers[k] = LiveServer(lev.data_dir, QUIET, log_name=f"bench-{k}", root=root,
                                        python=own_python(root)).start(timeout=300)
        return {"small": c1_alternating(servers, token, test, "hybrid"), "load": started}
    finally:
        for server in servers.values():
            server.stop()
        cleanup(lev)


def side(root: Path, parts: list[str]) -> dict[str, Any]:
    lev = start_lev(root=root, python=own_python(root))
    out: dict[str, Any] = {"load": {}}
    try:
        c = httpx.Client(base_url=lev.url, headers=lev.headers(), timeout=120)
        cpu = Cpu(lev.server.proc.pid, lev.data_dir)  # type: ignore[union-attr]
        if "log" in parts:
            out["load"]["log"] = load()
            out["log"] = idle_part(lev)
        for n in range(40):
            c.post("/api/v1/ingest", json={"kind": "text", "auto_transform": False,
                                           "text": f"{QUERIES[n % 5]} note {n}: " + "words " * 50})
        if "webhooks" in parts:
            out["load"]["webhooks"] = load()
            out["webhooks"] = webhooks_part(lev, c, cpu)
        if "feeds" in parts:
            out["load"]["feeds"] = load()
            out["feeds"] = feeds_part(lev, c, cpu)
    finally:
        cleanup(lev)
    return out


def _row(runs: dict[str, dict[str, Any]], label: str, part: str, shown: Any, goal: str = "") -> str:
    cells = [shown(runs[k][part]) if k in runs else "" for k in ("old", "new")]
    return f"| {label} | {cells[0]} | {cells[1]} | {goal} |"


def _ms(key: str, digits: int = 2) -> Any:
    return lambda x: format(x[key], f".{digits}f")


def report(runs: dict[str, dict[str, Any]], parts: list[str]) -> list[str]:
    out = [f"Old: `git archive {OLD}` (main before issue 40); new: this commit. Each side a fresh `lev serve` (worker "
           "inline, embedded PostgreSQL and Redis), old first.", "",
           "| figure | old | new | goal |", "| --- | --- | --- | --- |"]
    if "log" in parts:
        out.append(_row(runs, f"idle server: log lines in {IDLE_SEC} s", "log", lambda x: str(x["lines"]), "0"))
    if "webhooks" in parts:
        out += [_row(runs, "webhook `item.ready` after the ingest's answer, p50 / p95 / p99 ms", "webhooks",
                     lambda x: fmt_pct(x["latency"]), "≤ 100 / 150"),
                _row(runs, f"{BURST:,} queued deliveries: deliveries per second", "webhooks", _ms("rate", 1), "≥ 200"),
                _row(runs, "server CPU per delivery (lev process), ms", "webhooks", _ms("cpu"), "≤ 3"),
                _row(runs, "PostgreSQL CPU per delivery, ms", "webhooks", _ms("pg"))]
    if "feeds" in parts:
        out += [_row(runs, f"{FEEDS:,} feeds answering 304: polls per second", "feeds", _ms("rate", 1), "≥ 100"),
                _row(runs, "server CPU per poll (lev process), ms", "feeds", _ms("cpu"), "≤ 5"),
                _row(runs, "PostgreSQL CPU per poll, ms", "feeds", _ms("pg")),
                _row(runs, "polls answered 304 in the two rounds (failed)", "feeds",
                     lambda x: f"{x['not_modified']} ({x['failed']})"),
                _row(runs, "search p50 / p95 / p99 ms, nothing polling", "feeds", lambda x: fmt_pct(x["idle"])),
                _row(runs, "search p50 / p95 / p99 ms, during the polls", "feeds", lambda x: fmt_pct(x["during"]),
                     "p95 within 10 %")]
    if "search" in parts and "search" in runs:
        small = runs["search"]["small"]
        cells = [fmt_pct(small[k]) if k in small else "" for k in ("old", "new")]
        out.append(f"| the small user's hybrid search, p50 / p95 / p99 ms (c=1, 200 claims alternating) | {cells[0]} "
                   f"| {cells[1]} | p95 ≤ 15 |")
    loads = "; ".join(f"{k}: " + ", ".join(f"{part} {v:.2f}" for part, v in runs[k]["load"].items())
                      for k in ("old", "new", "search") if k in runs)
    noisy = any(v > QUIET_LOAD for r in runs.values() for v in r["load"].values())
    out += ["", f"Load average (1 min) when each part started: {loads}."
            + (f" Above {QUIET_LOAD}: the machine was not quiet; rerun `make bench-automation` on a quiet one."
               if noisy else "")]
    if "log" in parts:
        for k in ("old", "new"):
            if k in runs and runs[k]["log"]["sample"]:
                out += ["", f"The {k} idle server's first lines:", "", "```", *runs[k]["log"]["sample"], "```"]
    return out


def main() -> str:
    sides = [s for s in os.environ.get("LEV_BENCH_SIDES", "old,new").split(",") if s]
    parts = [p for p in os.environ.get("LEV_BENCH_AUTOMATION", "log,webhooks,feeds,search").split(",") if p]
    roots = {"old": old_tree, "new": lambda: ROOT}
    runs = {k: side(roots[k](), parts) for k in sides}
    if "search" in parts:
        try:
            found = search_part(sides)
            runs["search"] = {"small": found["small"], "load": {"search": found["load"]}}
        except Exception as exc:  # the other parts' figures are kept
            parts = [p for p in parts if p != "search"]
            runs["failed"] = {"load": {}, "error": f"the search part failed: {type(exc).__name__}: {exc}"}
    failed = [runs.pop("failed")["error"]] if "failed" in runs else []
    return "\n".join([__doc__.split("\n\n", 1)[1].strip(), "", *report(runs, parts), *failed])
