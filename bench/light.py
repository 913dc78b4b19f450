"""Issue 33 (the light install): this commit against `OLD` (84739d0: torch, sentence-transformers), in one run on
one machine. Each side is a fresh clone of its commit running in the environment its own `make run` built (pip's
cache warm), so each runs with its own dependencies; the benchmark's client side is this checkout.

Measured: the installed size of that environment and the cold `make run` to serving; `lev serve` start to ready
on a warm machine; peak RSS of the API process and of its ingest embedding process under the load mix and during a
bulk ingest; ingest embedding throughput (the embedder alone, and end to end through the API); hybrid search at
about 100k chunks; SciFact test nDCG@10 through the API. Old and new alternate wherever the machine's speed
matters, so a drift in this shared machine's load falls on both.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from bench.busy import QUIET, base_corpus, c1_alternating, cpu_gauge, grow, loadavg, reindex
from bench.common import ROOT, SCIFACT, cleanup, fmt_pct, schema_seen_by, start_lev
from bench.latency import db_url
from bench.load import RAISED, _mixed_load
from bench.quality import metrics, rest_run
from bench.scifact import ingest_docs, load_data
from tests.stack import LiveServer, free_port

OLD = os.environ.get("LEV_BENCH_OLD", "84739d0")  # main before issue 33
WORK = Path(os.environ.get("LEV_BENCH_LIGHT_DIR", "/tmp/lev-bench-light"))
# LEV_BENCH_LIGHT_SMOKE=1: a short dry run of every step; its figures mean nothing. LEV_BENCH_LIGHT_REUSE=1: keep
# the clones (and environments) of an earlier run whose commits match, so the install is not measured again.
SMOKE = bool(os.environ.get("LEV_BENCH_LIGHT_SMOKE"))
REUSE = bool(os.environ.get("LEV_BENCH_LIGHT_REUSE"))
LOAD_SECONDS = 10 if SMOKE else 60
WARM_STARTS = 1 if SMOKE else 4
SEARCH_CHUNKS = 5_000 if SMOKE else 100_000
C1 = 20 if SMOKE else 200
RAW_DOCS = 40 if SMOKE else 300
SCIFACT_DOCS = 300 if SMOKE else None  # None: all 5,183


@dataclass
class Side:
    name: str
    sha: str
    root: Path
    cold_s: float | None = None
    venv_mib: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def python(self) -> str:
        return str(self.root / ".venv" / "bin" / "python")


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def clean_env() -> dict[str, str]:
    """This process's environment without its virtualenv, as a user's shell would have it."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "LEV_DATA_DIR")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p + "/")
    return env


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"exited early ({proc.returncode})")
        try:
            if httpx.get(f"{url}/api/v1/openapi.json", timeout=1).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"not ready after {timeout:.0f} s")


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT to the process group it leads (make and lev serve: a clean shutdown), then SIGKILL if it hangs."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


# ----------------------------------------------------------------------------- install and start
def cold_run(side: Side) -> None:
    """A fresh clone, then `make run` until it serves (virtualenv, packages from pip's warm cache, the data
    directory's first start); then the environment's size on disk."""
    if side.root.exists():
        shutil.rmtree(side.root)
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(side.root)], check=True)
    git("checkout", "--quiet", side.sha, cwd=side.root)
    port = free_port()
    with open(WORK / f"make-run-{side.name}.log", "wb") as log:
        proc = subprocess.Popen(["make", "run", f"PORT={port}"], cwd=side.root, env=clean_env(), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            side.cold_s = wait_ready(f"http://127.0.0.1:{port}", proc, 3600)
        finally:
            stop_group(proc)
    du = subprocess.run(["du", "-s", "--block-size=1M", str(side.root / ".venv")], capture_output=True, text=True,
                        check=True).stdout.split()[0]
    side.venv_mib = float(du)


def warm_start(side: Side) -> tuple[float, float]:
    """`lev serve` on the data directory `make run` made, from the exec to its first answer: (seconds, CPU seconds
    of the server and of every process it started, the embedded servers included, up to then)."""
    port = free_port()
    env = {**clean_env(), "LEV_LOG_FORMAT": "console"}
    with open(WORK / f"serve-{side.name}.log", "ab") as log:
        proc = subprocess.Popen([side.python, "-m", "lev.cli", "serve", "--port", str(port)], cwd=side.root,
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            seconds = wait_ready(f"http://127.0.0.1:{port}", proc, 600)
            tree = psutil.Process(proc.pid)
            cpu = 0.0
            for p in (tree, *tree.children(recursive=True)):
                try:
                    t = p.cpu_times()
                    cpu += t.user + t.system
                except psutil.Error:
                    pass
            return seconds, cpu
        finally:
            stop_group(proc)


# ----------------------------------------------------------------------------- memory
def embed_children(proc: psutil.Process) -> list[psutil.Process]:
    return [c for c in proc.children() if "embed_worker" in " ".join(c.cmdline())]  # the old commit's ingest child


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a server process and of its ingest embedding child so far."""
    proc = psutil.Process(pid)
    return sum(t.user + t.system for t in (p.cpu_times() for p in (proc, *embed_children(proc))))


class Peaks:
    """RSS of a server process and of its ingest embedding child, sampled together every 0.25 s; and the CPU
    seconds both used meanwhile."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.api = self.child = self.pair = self.cpu = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        api = self.proc.memory_info().rss
        child = sum(c.memory_info().rss for c in embed_children(self.proc))
        self.api, self.child = max(self.api, api / 2**20), max(self.child, child / 2**20)
        self.pair = max(self.pair, (api + child) / 2**20)

    def _run(self) -> None:
        while not self._done.is_set():
            try:
                self._sample()
            except psutil.Error:
                pass
            time.sleep(0.25)

    def __enter__(self) -> Peaks:
        self.cpu = -cpu_seconds(self.proc.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.cpu += cpu_seconds(self.proc.pid)


def load_mix(side: Side, base: list[tuple[str, list[str], np.ndarray]]) -> dict[str, Any]:
    """The load part's mix for LOAD_SECONDS on a fresh stack holding 200 SciFact documents."""
    import psycopg
    from pgvector.psycopg import register_vector

    lev = start_lev(RAISED, root=side.root, python=side.python)
    try:
        with psycopg.connect(db_url(), autocommit=True) as conn:
            register_vector(conn)
            grow(conn, base[:200], [(lev.user_id, sum(len(b) for _, b, _ in base[:200]))], random.Random(1),
                 np.random.default_rng(1))
            conn.execute("ANALYZE")
        item_ids = [str(r[0]) for r in lev.admin.sql("SELECT id FROM user_items WHERE user_id = :u", u=lev.user_id)]
        assert lev.server.proc is not None
        before = f"{loadavg()} (gauge {cpu_gauge():.0f} ms)"
        with Peaks(lev.server.proc.pid) as peaks:
            started = time.monotonic()
            lat, errors, limited = _mixed_load(lev.url, lev.token, item_ids, started + LOAD_SECONDS)
            elapsed = time.monotonic() - started
    finally:
        cleanup(lev)
    done = sum(len(v) for v in lat.values())
    return {"api": peaks.api, "child": peaks.child, "pair": peaks.pair, "errors": sum(errors.values()),
            "rps": done / elapsed, "cpu_ms": 1000 * peaks.cpu / max(done, 1), "limited": limited, "load": before}


# ----------------------------------------------------------------------------- ingest embedding
RAW = """
import importlib, json, sys, time
try:
    from lev.embedding.embedder import LocalEmbedder
except ImportError:  # before the move to lev/embedding/ (spelt so that relayout.py leaves it alone)
    LocalEmbedder = importlib.import_module(".".join(["lev", "pipeline", "embedder"])).LocalEmbedder
texts = json.load(open(sys.argv[1]))
emb = LocalEmbedder()
emb.embed(texts[:8])
wall, cpu = time.perf_counter(), time.process_time()
for i in range(0, len(texts), 64):
    emb.embed(texts[i:i + 64])
print(json.dumps({"n": len(texts), "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}))
"""


def raw_inputs() -> Path:
    """The strings the ingest path embeds for the chunks of the first RAW_DOCS SciFact documents."""
    from bench.corpus import documents
    from lev.ingest.chunking import chunk_text, embed_input

    path = WORK / f"raw-inputs-{RAW_DOCS}.json"
    path.write_text(json.dumps([embed_input(t, c) for t, x in documents(RAW_DOCS) for c in chunk_text(x, t)]))
    return path


def raw_embed(side: Side, inputs: Path) -> dict[str, float]:
    """The side's `LocalEmbedder.embed` alone (in its own process, batches of 64 as the job path sends them)."""
    env = {**clean_env(), "PYTHONPATH": str(side.root), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([side.python, "-c", RAW, str(inputs)], cwd=side.root, env=env, capture_output=True,
                         text=True, check=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


# ----------------------------------------------------------------------------- search and quality
def search_100k(sides: dict[str, Side], base: list[tuple[str, list[str], np.ndarray]],
                claims: list[str]) -> dict[str, dict[str, dict[str, float]]]:
    """One user's library of SEARCH_CHUNKS chunks; old and new servers side by side on it, c=1 alternating."""
    import psycopg
    from pgvector.psycopg import register_vector

    new = sides["new"]
    lev = start_lev(QUIET, root=new.root, python=new.python)
    servers: dict[str, LiveServer] = {}
    try:
        with psycopg.connect(db_url(), autocommit=True) as conn:
            register_vector(conn)
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
            grow(conn, base, [(lev.user_id, SEARCH_CHUNKS)], random.Random(33), np.random.default_rng(33))
            reindex(conn)
        for k, side in sides.items():
            with schema_seen_by(lev.admin, side.root):
                servers[k] = LiveServer(lev.data_dir, QUIET, log_name=f"light-{k}", root=side.root,
                                        python=side.python).start(timeout=600)
        out: dict[str, dict[str, dict[str, float]]] = {}
        pids = {k: s.proc.pid for k, s in servers.items() if s.proc is not None}
        for mode in ("hybrid", "semantic"):
            cpu = {k: cpu_seconds(pid) for k, pid in pids.items()}
            out[mode] = c1_alternating(servers, lev.token, claims, mode)
            for k, pid in pids.items():  # CPU ms per request (the 10 warm-up requests included)
                out[mode][k]["cpu_ms"] = 1000 * (cpu_seconds(pid) - cpu[k]) / (len(claims) + 10)
        return out
    finally:
        for s in servers.values():
            s.stop()
        cleanup(lev)


def scifact(side: Side, corpus: dict[str, tuple[str, str]], queries: dict[str, str],
            qrels: dict[str, dict[str, int]], test: list[str]) -> dict[str, Any]:
    """SciFact ingested through the API (the bulk ingest: peak RSS and chunks/s), then the test queries."""
    lev = start_lev(root=side.root, python=side.python)
    try:
        assert lev.server.proc is not None
        with Peaks(lev.server.proc.pid) as peaks:
            item_to_doc, seconds = ingest_docs(lev, corpus)
        chunks = int(lev.admin.sql("SELECT count(*) FROM chunks")[0][0])
        lev.admin.sql("ANALYZE")
        ndcg = {mode: metrics(rest_run(lev, queries, test, mode, item_to_doc)[0], qrels)["ndcg_cut.10"]
                for mode in ("hybrid", "semantic", "keyword")}
    finally:
        cleanup(lev)
    return {"ndcg": ndcg, "chunks": chunks, "seconds": seconds, "api": peaks.api, "child": peaks.child,
            "pair": peaks.pair, "docs": len(corpus), "cpu": peaks.cpu}


# ----------------------------------------------------------------------------- the part
def alternate(sides: dict[str, Side], runs: int, measure: Callable[[Side], Any]) -> dict[str, list[Any]]:
    """`measure` on old, new, new, old, old, new, ... (`runs` each)."""
    out: dict[str, list[Any]] = {"old": [], "new": []}
    for i in range(runs):
        for k in (("old", "new") if i % 2 == 0 else ("new", "old")):
            out[k].append(measure(sides[k]))
    return out


def main() -> str:
    WORK.mkdir(parents=True, exist_ok=True)
    if git("status", "--porcelain", "--untracked-files=no"):
        raise SystemExit("commit first: the new side is a fresh clone of HEAD")
    sides = {"old": Side("old", git("rev-parse", "--short", OLD), WORK / "old"),
             "new": Side("new", git("rev-parse", "--short", "HEAD"), WORK / "new")}
    t0 = time.perf_counter()
    out: list[str] = []
    lines = out.append

    for side in sides.values():  # 1. fresh clone and `make run`, one at a time
        if REUSE and (side.root / ".venv" / ".installed").exists() and git("rev-parse", "--short", "HEAD",
                                                                           cwd=side.root) == side.sha:
            continue
        cold_run(side)
    starts = alternate(sides, WARM_STARTS, warm_start)  # 2. warm starts

    base = base_corpus()  # 3. memory under the load mix
    mix = alternate(sides, 1 if SMOKE else 2, lambda s: load_mix(s, base))

    inputs = raw_inputs()  # 4. the embedder alone
    raw = alternate(sides, 1 if SMOKE else 2, lambda s: raw_embed(s, inputs))

    corpus, queries, qrels = load_data(SCIFACT)  # 5. search at 100k chunks
    test = [q for q in qrels["test"] if q in queries]
    search = search_100k(sides, base, [queries[q] for q in test][:C1])

    if SCIFACT_DOCS:  # 6. SciFact through the API (and the bulk ingest's memory and rate)
        corpus = dict(list(corpus.items())[:SCIFACT_DOCS])
    quality = {k: scifact(sides[k], corpus, queries, qrels["test"], test) for k in ("old", "new")}

    def both(f: Callable[[str], str]) -> str:
        return f"{f('old')} | {f('new')}"

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    old, new = sides["old"], sides["new"]
    lines(f"### Light install (issue 33): this commit ({new.sha}) vs {old.sha}, the commit before the work")
    lines("")
    lines(f"Each side is a fresh `git clone` of its commit in {WORK}, run in the virtualenv its own `make run` "
          "built (pip's cache warm: no download). The machine's 2 cores are shared with other sessions; old and new "
          "alternate wherever speed matters. Load average (1/5/15 min) at the end: " + loadavg() + ".")
    lines("")
    lines("| measure | old | new | goal |")
    lines("| --- | --- | --- | --- |")
    def num(x: float | None) -> str:
        return "not measured (reused)" if x is None else f"{x:.0f}"

    lines(f"| installed size of the `make run` environment (`du -s .venv`), MiB | {num(old.venv_mib)} | "
          f"{num(new.venv_mib)} | ≤ 700 |")
    lines(f"| cold `make run` on a fresh clone to serving, s | {num(old.cold_s)} | {num(new.cold_s)} | |")
    lines(f"| `lev serve` start to ready (warm machine, {WARM_STARTS} each), s: mean, each | "
          + both(lambda k: f"{mean([s for s, _ in starts[k]]):.1f}: " + ", ".join(f"{s:.1f}" for s, _ in starts[k]))
          + " | ≤ 5 |")
    lines("| CPU time of that start (server and what it started), s: mean | "
          + both(lambda k: f"{mean([c for _, c in starts[k]]):.1f}") + " | |")
    def mib(x: float) -> str:
        return f"{x:.0f}" if x else "none"

    for label, key in (("API process", "api"), ("ingest embedding process", "child"), ("the pair", "pair")):
        lines(f"| peak RSS under the load mix ({LOAD_SECONDS} s, 16 clients), {label}, MiB | "
              + both(lambda k, key=key: " / ".join(mib(r[key]) for r in mix[k]))
              + (" | ≤ 400 |" if key == "pair" else " | |"))
    for label, key in (("API process", "api"), ("ingest embedding process", "child"), ("the pair", "pair")):
        lines(f"| peak RSS during the bulk ingest (SciFact, {quality['old']['docs']:,} documents, 3 clients), "
              f"{label}, MiB | " + both(lambda k, key=key: mib(quality[k][key])) + " | |")
    lines("| load mix throughput, req/s (errors) | "
          + both(lambda k: " / ".join(f"{r['rps']:.1f} ({r['errors']})" for r in mix[k])) + " | |")
    lines("| load mix, server CPU ms per request (API process and ingest child) | "
          + both(lambda k: " / ".join(f"{r['cpu_ms']:.1f}" for r in mix[k])) + " | |")
    lines(f"| ingest embedding alone, chunks/s (wall; CPU s per 100 chunks), {len(json.loads(inputs.read_text()))} "
          "chunks in batches of 64 | "
          + both(lambda k: " / ".join(f"{r['n'] / r['wall']:.1f} ({100 * r['cpu'] / r['n']:.1f})" for r in raw[k]))
          + " | ≥ old |")
    lines("| bulk ingest through the API, chunks/s (chunks in s) | "
          + both(lambda k: f"{quality[k]['chunks'] / quality[k]['seconds']:.1f} ({quality[k]['chunks']:,} in "
                           f"{quality[k]['seconds']:.0f})") + " | ≥ old |")
    lines("| bulk ingest, server CPU s per 100 chunks (API process and ingest child) | "
          + both(lambda k: f"{100 * quality[k]['cpu'] / quality[k]['chunks']:.1f}") + " | |")
    for mode in ("hybrid", "semantic"):
        lines(f"| {mode} search at {SEARCH_CHUNKS:,} chunks, c=1, {C1} claims alternating, p50 / p95 / p99 ms "
              "(server CPU ms per request) | "
              + both(lambda k, mode=mode: f"{fmt_pct(search[mode][k])} ({search[mode][k]['cpu_ms']:.1f})")
              + (" | ≤ old |" if mode == "hybrid" else " | |"))
    for mode in ("hybrid", "semantic", "keyword"):
        lines(f"| SciFact test nDCG@10 through the API, {mode} | "
              + both(lambda k, mode=mode: f"{quality[k]['ndcg'][mode]:.4f}")
              + (" | 0.7336 ± 0.002 |" if mode == "hybrid" else " | old ± 0.002 |" if mode == "semantic" else " | |"))
    lines("")
    lines("Notes:")
    lines("- Peak RSS: the server process and its ingest embedding child (before: the `embed_worker` process; now "
          "none, ingest batches run on niced threads of the server), sampled together every 0.25 s; each run's "
          "peak, in run order.")
    lines("- The embedder alone: each side's `LocalEmbedder().embed` in a process of its own with its own "
          "dependencies (before: sentence-transformers on torch; now: ONNX Runtime), the same strings "
          "(`embed_input` of the chunks of SciFact documents), after one warm-up batch; CPU is the process's "
          "user+system time over all its threads.")
    lines(f"- Runtime {time.perf_counter() - t0:.0f} s.")
    return "\n".join(out)


if __name__ == "__main__":
    print(main())
