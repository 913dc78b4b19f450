"""Issue 52: a request costs what its work costs. The server's CPU per request for `/healthz`, a folder list, an item
list, keyword and hybrid search and a small write (a folder's rename), each beside its floor (the same domain and
store calls answered by a bare ASGI endpoint in the same process, `bench/cost_server.py`), this commit beside the
commit before the work (`OLD`), in one run.

One embedded stack holds one user's library (SciFact documents ingested through the API, filed into folders). Two
servers run on it side by side, each from its own checkout (the old commit's `git archive`, this one), neither
with the worker inline, the hourly limits on (raised so that no request is refused). A measurement is N requests in
a row from one keep-alive client; the server's CPU is its process's utime + stime (/proc/PID/stat, every thread,
those that ended too) read before and after, with the activity writer's flush (every 0.5 s) inside the span, less
the process's idle CPU over as long. Rounds alternate the order of old / new and Lev / floor. Searches use SciFact
claims, each claim once per process and mode (the Lev side and the floor side distinct claims), so no cache of
recent query embeddings is ever hit.

    python -m bench.run cost               # (make bench-cost)
    LEV_BENCH_COST_OLD=none                # this commit alone
    LEV_BENCH_COST_ROUNDS=2                # fewer rounds (4 by default)

Targets (issue 52): a read at most 2 ms of CPU above its floor, a write at most 4 ms above, hybrid search at most
12 ms in all.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import ROOT, SCIFACT, Lev, cleanup, machine, old_tree_at, schema_seen_by, start_lev
from bench.load import RAISED
from bench.scifact import ingest_docs, load_data
from tests.stack import LiveServer

OLD = os.environ.get("LEV_BENCH_COST_OLD", "956d45c")  # main before issue 52's item 5
ROUNDS = int(os.environ.get("LEV_BENCH_COST_ROUNDS", 4))
DOCS = int(os.environ.get("LEV_BENCH_COST_DOCS", 300))
FOLDERS = 8
SETTLE_SEC = 0.7  # past the activity writer's flush interval (0.5 s)
CLK_TCK = os.sysconf("SC_CLK_TCK")
ENV = {**RAISED, "LEV_WORKERS_INLINE": "false"}
# name, label, requests in a row, read or write
REQUESTS = (
    ("healthz", "`GET /healthz`", 400),
    ("folders", "`GET /api/v1/folders`", 300),
    ("items", "`GET /api/v1/items?per_page=10`", 300),
    ("keyword", "`GET /api/v1/search?mode=keyword` (limit 10)", 120),
    ("hybrid", "`GET /api/v1/search?mode=hybrid` (limit 10)", 120),
    ("rename", "`PATCH /api/v1/folders/{id}` (a rename)", 200),
)
TARGET = {"healthz": ("floor", 2.0), "folders": ("floor", 2.0), "items": ("floor", 2.0),
          "keyword": ("floor", 2.0), "hybrid": ("total", 12.0), "rename": ("floor", 4.0)}


class CostServer(LiveServer):
    """`bench/cost_server.py`: `lev serve` of `root` with the floor in the same process."""

    def __init__(self, data_dir: Path, env: dict[str, str], log_name: str, root: Path) -> None:
        super().__init__(data_dir, env, log_name=log_name, root=root, args=["--no-workers-inline"])
        self.command = [self.python, str(ROOT / "bench" / "cost_server.py")]


def cpu_sec(pid: int) -> float:
    """utime + stime of the process (every thread's, ended ones' too; the kernel scales them to its precise run
    time), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Side:
    """One server and a client on it; `call(name, floor, i)` sends one request of a kind (the i-th of its run)."""

    def __init__(self, name: str, server: LiveServer, token: str, folder_ids: list[str],
                 claims: dict[str, list[str]]) -> None:
        self.name, self.server = name, server
        self.pid = server.proc.pid  # type: ignore[union-attr]
        self.client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
        self.folder = {False: folder_ids[0], True: folder_ids[1]}  # the folder each side renames
        self.claims = claims  # "lev" / "floor" -> claims, used in turn (each once per mode)
        self.used: dict[tuple[str, str], int] = {}
        self.renamed = 0

    def _claim(self, mode: str, floor: bool) -> str:
        k = "floor" if floor else "lev"
        n = self.used.get((mode, k), 0)
        if n >= len(self.claims[k]):
            raise RuntimeError(f"{self.name} ran out of claims for {mode}: fewer rounds (LEV_BENCH_COST_ROUNDS)")
        self.used[(mode, k)] = n + 1
        return self.claims[k][n]

    def call(self, name: str, floor: bool) -> httpx.Response:
        c, pre = self.client, "/floor" if floor else ""
        if name == "healthz":
            return c.get(f"{pre}/healthz")
        if name == "folders":
            return c.get(f"{pre}/folders" if floor else "/api/v1/folders")
        if name == "items":
            return c.get(f"{pre}/items" if floor else "/api/v1/items", params={"per_page": 10})
        if name in ("keyword", "hybrid"):
            return c.get(f"{pre}/search" if floor else "/api/v1/search",
                         params={"q": self._claim(name, floor), "mode": name, "limit": 10})
        if name == "rename":
            self.renamed += 1
            folder = self.folder[floor]
            return c.patch(f"{pre}/folders/{folder}" if floor else f"/api/v1/folders/{folder}",
                           json={"name": f"cost {self.name} {'floor' if floor else 'lev'} {self.renamed}"})
        raise ValueError(name)

    def run(self, name: str, floor: bool, n: int, idle_rate: float) -> tuple[float, list[float]]:
        """n requests in a row: (server CPU ms per request, wall ms of each)."""
        for _ in range(5):
            self.call(name, floor)
        time.sleep(SETTLE_SEC)
        wall: list[float] = []
        before, t0 = cpu_sec(self.pid), time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            r = self.call(name, floor)
            wall.append((time.perf_counter() - t) * 1000)
            if r.status_code != 200:
                raise RuntimeError(f"{self.name} {name} floor={floor}: {r.status_code} {r.text[:300]}")
        time.sleep(SETTLE_SEC)
        used = cpu_sec(self.pid) - before - idle_rate * (time.perf_counter() - t0)
        return used * 1000 / n, wall

    def idle_rate(self, seconds: float = 3.0) -> float:
        """CPU seconds per second while no request comes."""
        time.sleep(SETTLE_SEC)
        before, t0 = cpu_sec(self.pid), time.perf_counter()
        time.sleep(seconds)
        return (cpu_sec(self.pid) - before) / (time.perf_counter() - t0)

    def close(self) -> None:
        self.client.close()


def same_answers(side: Side) -> list[str]:
    """Where a floor answers other than Lev (it must do the same work): the reads' bodies compared."""
    out = []
    for name in ("folders", "items"):
        a, b = side.call(name, False).json(), side.call(name, True).json()
        if a != b:
            out.append(f"{side.name} {name}: Lev and floor differ")
    for mode in ("keyword", "hybrid"):
        q = "vitamin D deficiency and bone density"
        a = side.client.get("/api/v1/search", params={"q": q, "mode": mode, "limit": 10}).json()
        b = side.client.get("/floor/search", params={"q": q, "mode": mode, "limit": 10}).json()
        if [h["chunk_id"] for h in a["results"]] != [h["chunk_id"] for h in b["results"]]:
            out.append(f"{side.name} {mode}: Lev and floor found other hits")
    return out


def seed(lev: Lev) -> list[str]:
    """DOCS SciFact documents through the API, FOLDERS folders with every item filed into one of them; the folder
    ids."""
    corpus, _, _ = load_data(SCIFACT)
    docs = dict(list(corpus.items())[:DOCS])
    items, _ = ingest_docs(lev, docs)
    with httpx.Client(base_url=lev.url, headers=lev.headers(), timeout=120) as c:
        folder_ids = []
        for n in range(FOLDERS):
            r = c.post("/api/v1/folders", json={"name": f"folder {n}"})
            assert r.status_code == 201, r.text
            folder_ids.append(r.json()["id"])
        for k, item_id in enumerate(items):
            r = c.post(f"/api/v1/items/{item_id}/folders", json={"folder_ids": [folder_ids[k % FOLDERS]]})
            assert r.status_code == 200, r.text
    return folder_ids


def claims_for(sides: list[str]) -> dict[str, dict[str, list[str]]]:
    """Each side's claims for its Lev and its floor requests: disjoint halves of SciFact's claims (the same halves
    for every side, so old and new search the same claims)."""
    _, queries, _ = load_data(SCIFACT)
    texts = sorted(set(queries.values()))
    random.Random(52).shuffle(texts)
    half = len(texts) // 2
    return {s: {"lev": texts[:half], "floor": texts[half:]} for s in sides}


def measure(sides: list[Side]) -> dict[str, Any]:
    idle = {s.name: s.idle_rate() for s in sides}
    cpu: dict[str, dict[str, dict[str, list[float]]]] = {
        s.name: {k: {"lev": [], "floor": []} for k, _, _ in REQUESTS} for s in sides}
    wall: dict[str, dict[str, dict[str, list[float]]]] = {
        s.name: {k: {"lev": [], "floor": []} for k, _, _ in REQUESTS} for s in sides}
    loads = [" ".join(f"{x:.1f}" for x in os.getloadavg())]
    for name, _, n in REQUESTS:
        for r in range(ROUNDS):
            order = [(s, floor) for s in sides for floor in (False, True)]
            for s, floor in (order if r % 2 == 0 else order[::-1]):
                ms, w = s.run(name, floor, n, idle[s.name])
                k = "floor" if floor else "lev"
                cpu[s.name][name][k].append(ms)
                wall[s.name][name][k].extend(w)
        loads.append(" ".join(f"{x:.1f}" for x in os.getloadavg()))
        print(f"{name}: " + "; ".join(f"{s.name} {statistics.median(cpu[s.name][name]['lev']):.2f} / floor "
                                      f"{statistics.median(cpu[s.name][name]['floor']):.2f} ms"
                                      for s in sides) + f" (load {loads[-1]})", file=sys.stderr)
    return {"cpu": cpu, "wall": wall, "idle": idle, "loads": loads}


def table(result: dict[str, Any], names: list[str]) -> str:
    cpu, wall = result["cpu"], result["wall"]
    med = statistics.median
    head = "| request | " + " | ".join(f"{n}: Lev | {n}: floor | {n}: above floor" for n in names) + \
        " | target | met (new) | wall p50 ms, " + " / ".join(names) + " |"
    lines = [head, "| " + " | ".join(["---"] * (1 + 3 * len(names) + 3)) + " |"]
    for name, label, n in REQUESTS:
        cells = []
        for s in names:
            lev, floor = med(cpu[s][name]["lev"]), med(cpu[s][name]["floor"])
            cells.append(f"{lev:.2f} | {floor:.2f} | {lev - floor:+.2f}")
        kind, bound = TARGET[name]
        last = names[-1]
        lev, floor = med(cpu[last][name]["lev"]), med(cpu[last][name]["floor"])
        value = lev if kind == "total" else lev - floor
        target = f"≤ {bound:g} ms in all" if kind == "total" else f"≤ {bound:g} ms above the floor"
        walls = " / ".join(f"{med(wall[s][name]['lev']):.1f}" for s in names)
        lines.append(f"| {label}, {n} in a row | " + " | ".join(cells) +
                     f" | {target} | {'yes' if value <= bound else 'no'} ({value:.2f}) | {walls} |")
    return "\n".join(lines)


def main() -> str:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    roots = {"new": ROOT} if OLD == "none" else {"old": old_tree_at(OLD), "new": ROOT}
    t = time.perf_counter()
    lev = start_lev()
    sides: list[Side] = []
    servers: list[LiveServer] = []
    try:
        folder_ids = seed(lev)
        print(f"seeded in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        claims = claims_for(list(roots))
        for name, root in roots.items():
            with schema_seen_by(lev.admin, root):
                server = CostServer(lev.data_dir, ENV, f"cost-{name}", root).start(timeout=300)
            servers.append(server)
            sides.append(Side(name, server, lev.token, folder_ids[2 * len(sides):], claims[name]))
        differ = [d for s in sides for d in same_answers(s)]
        for s in sides:  # warm: plans prepared, pages cached, the model's first runs done
            for name, _, _ in REQUESTS:
                for floor in (False, True):
                    for _ in range(20):
                        s.call(name, floor)
        result = measure(sides)
    finally:
        for s in sides:
            s.close()
        for server in servers:
            server.stop()
        cleanup(lev)
    names = [s.name for s in sides]
    out = [f"{machine()}; " + (f"new = this commit, old = {OLD} (main before the work), each from its own checkout "
                               "(old: `git archive`), both servers on one database" if OLD != "none"
                               else "this commit alone"),
           "",
           f"Server CPU per request, ms (median of {ROUNDS} runs of N requests in a row, one keep-alive client; "
           "utime + stime of the server process from /proc/PID/stat, its idle CPU taken off: "
           + ", ".join(f"{k} {v * 1000:.1f} ms/s" for k, v in result["idle"].items()) + "). Lev = the REST "
           "request through every layer; floor = the same domain and store calls answered by a bare ASGI "
           "endpoint in the same process (`bench/cost_server.py`). Hourly limits on (raised so that none "
           f"refuses), no worker inline; {DOCS} SciFact documents in {FOLDERS} folders; searches by SciFact claims, "
           "each claim once per process and mode.", "", table(result, names), "",
           f"- load average (1, 5, 15 min) before and after each request kind: {' → '.join(result['loads'])}"]
    if differ:
        out.append(f"- WARNING: {'; '.join(differ)}")
    report = "\n".join(out)
    print(report)
    return report


if __name__ == "__main__":
    main()
