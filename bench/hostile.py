"""Issue 32: /healthz while hostile bodies and imports arrive, this commit against the commit before the work
(`OLD`, 84739d0), in the same run on the same machine, a fresh stack each time (in the order old, new, new, old).

Each phase sends its requests one after another from one client while a second client asks /healthz every 20 ms;
a phase ends when its last request is answered (or gives up after `TIMEOUT` seconds). Phases: quiet (no other
traffic), hostile JSON (an array of 200,000 integers to bulk-delete, a 1.6 MB body without credentials to sign-in,
an MCP call with 600,000 empty objects), hostile imports (4,900 folders of one name, 20 KB of unclosed `<a`, a
bookmark file of 100,000 links). The issue's 1.8 MB array of integers is not sent: the old server's process grew
past 3 GB on it and the shared machine's OOM killer ended it (first run of this part). The server's resident memory
is sampled with the probes. The worker does not run in the server (`LEV_WORKERS_INLINE=false`): what is
measured is the requests, not the imports' background ingest.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench import unfair
from bench.common import ROOT, cleanup, fmt_pct, old_tree_at, own_python, pct, start_lev

OLD = os.environ.get("LEV_BENCH_HOSTILE_OLD", "84739d0")  # main before issue 32
TIMEOUT = 300.0
QUIET_PROBES = 300
ENV = {"LEV_WORKERS_INLINE": "false", "LEV_LIMIT_SIGN_IN_IP": "100000/15 minutes"}
HEAD = "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n"
INTS = "[" + ",".join(["1"] * 200_000) + "]"
NESTED = "[" + ",".join(["[[[1]]]"] * 200_000) + "]"
EMPTY_OBJECTS = "[" + ",".join(["{}"] * 600_000) + "]"
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def old_tree() -> Path:
    return old_tree_at(OLD)


def bookmarks(body: str) -> bytes:
    return (HEAD + body + "</DL>\n").encode()


def hostile_json(url: str, token: str) -> list[tuple[str, Callable[[httpx.Client], httpx.Response]]]:
    auth = {"Authorization": f"Bearer {token}"}
    call = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_recent", "arguments": '
    return [
        ("bulk-delete, 200,000 integers (0.4 MB)", lambda c: c.post(
            "/api/v1/items/bulk-delete", content=f'{{"ids": {INTS}}}',
            headers={**auth, "Content-Type": "application/json"})),
        ("sign-in, 1.6 MB without credentials", lambda c: c.post(
            "/api/account/login", content=f'{{"password": {NESTED}}}', headers={"Content-Type": "application/json"})),
        ("MCP tools/call, 600,000 objects", lambda c: c.post(
            "/api/mcp", content=f'{call}{{"limit": 1, "x": {EMPTY_OBJECTS}}}}}}}', headers={**auth, **MCP_HEADERS})),
    ]


def hostile_imports(url: str, token: str) -> list[tuple[str, Callable[[httpx.Client], httpx.Response]]]:
    auth = {"Authorization": f"Bearer {token}"}
    same = bookmarks("".join(f'<DT><H3>Reading</H3>\n<DL><p>\n<DT><A HREF="https://e.com/{i}">t</A>\n</DL><p>\n'
                             for i in range(4900)))
    unclosed = (HEAD + "<a " * 7000).encode()  # no `>` to the end: html.parser rescans the rest at every `<a`
    links = bookmarks("".join(f'<DT><A HREF="https://e.com/{i}" ADD_DATE="1700000000">Link {i}</A>\n'
                              for i in range(100_000)))

    def post(data: bytes) -> Callable[[httpx.Client], httpx.Response]:
        return lambda c: c.post("/api/v1/imports", files={"file": ("bookmarks.html", data, "text/html")},
                                headers=auth)

    return [(f"import, 4,900 folders of one name ({len(same) // 1000} KB)", post(same)),
            (f"import, unclosed <a ({len(unclosed) // 1000} KB)", post(unclosed)),
            (f"import, 100,000 links ({len(links) / 1e6:.1f} MB)", post(links))]


def _rss(proc: psutil.Process) -> float:
    try:
        return float(proc.memory_info().rss) / 2**20
    except psutil.Error:
        return 0.0


def phase(url: str, proc: psutil.Process,
          requests: list[tuple[str, Callable[[httpx.Client], httpx.Response]]]) -> dict[str, Any]:
    """Send `requests` one after another while /healthz is probed every 20 ms (and the server's memory read)."""
    done = threading.Event()
    answers: list[dict[str, Any]] = []

    def send() -> None:
        with httpx.Client(base_url=url, timeout=TIMEOUT) as c:
            for name, request in requests:
                started = time.perf_counter()
                try:
                    r = request(c)
                    status, size = str(r.status_code), len(r.content)
                except httpx.HTTPError as exc:  # a timeout, or the server gone
                    status, size = type(exc).__name__, 0
                answers.append({"name": name, "s": time.perf_counter() - started, "status": status, "size": size})
        done.set()

    probes: list[float] = []
    failed = 0
    rss = [_rss(proc)]
    with httpx.Client(base_url=url, timeout=TIMEOUT) as probe:
        threading.Thread(target=send, daemon=True).start()
        while not done.is_set():
            started = time.perf_counter()
            try:
                probe.get("/healthz")
                probes.append((time.perf_counter() - started) * 1000)
            except httpx.HTTPError:
                failed += 1
            rss.append(_rss(proc))
            time.sleep(0.02)
    return {"probes": probes, "answers": answers, "failed": failed, "rss": max(rss)}


def quiet(url: str, proc: psutil.Process) -> dict[str, Any]:
    probes = []
    with httpx.Client(base_url=url, timeout=60) as probe:
        for _ in range(QUIET_PROBES):
            started = time.perf_counter()
            probe.get("/healthz")
            probes.append((time.perf_counter() - started) * 1000)
            time.sleep(0.02)
    return {"probes": probes, "answers": [], "failed": 0, "rss": _rss(proc)}


def side(root: Path) -> dict[str, dict[str, Any]]:
    lev = start_lev(ENV, root=root, python=own_python(root))
    proc = psutil.Process(lev.server.proc.pid)  # type: ignore[union-attr]
    try:
        load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
        out = {"quiet": quiet(lev.url, proc), "hostile JSON": phase(lev.url, proc, hostile_json(lev.url, lev.token)),
               "hostile imports": phase(lev.url, proc, hostile_imports(lev.url, lev.token))}
        out["quiet"]["load"] = load
    finally:
        cleanup(lev)
    return out


def main() -> str:
    """Issue 32's section (hostile bodies and imports) and issue 38's (`bench.unfair`); LEV_BENCH_HOSTILE_PARTS
    (`32`, `38`, or both by default) picks."""
    parts = os.environ.get("LEV_BENCH_HOSTILE_PARTS", "32,38").split(",")
    sections = ([issue_32()] if "32" in parts else []) + ([unfair.main()] if "38" in parts else [])
    return "\n\n".join(sections)


def issue_32() -> str:
    roots = {"old": old_tree(), "new": ROOT}
    runs: dict[str, list[dict[str, dict[str, Any]]]] = {"old": [], "new": []}
    for k in ("old", "new", "new", "old"):
        runs[k].append(side(roots[k]))
    out = [f"### /healthz while hostile bodies and imports arrive: this commit vs {OLD} (before issue 32)", "",
           f"Old code: `git archive {OLD}` served by the virtualenv its own `make` builds (its own dependencies). "
           "A fresh stack per run, in the order old, new, new, old; each side's two runs are pooled. One client "
           "sends the phase's requests one after another while another asks `/healthz` every 20 ms (latency of "
           "each probe, ms). The worker is off (`LEV_WORKERS_INLINE=false`), so only the requests themselves "
           "are measured.", "",
           "| phase | side | /healthz p50 / p95 / p99 (ms) | max (ms) | probes (failed) | server RSS peak (MiB) |",
           "| --- | --- | --- | --- | --- | --- |"]
    for name in ("quiet", "hostile JSON", "hostile imports"):
        for k in ("old", "new"):
            probes = [x for run in runs[k] for x in run[name]["probes"]] or [float("nan")]
            failed = sum(run[name]["failed"] for run in runs[k])
            rss = max(run[name]["rss"] for run in runs[k])
            out.append(f"| {name} | {k} | {fmt_pct(pct(probes))} | {max(probes):.0f} | {len(probes)} ({failed}) "
                       f"| {rss:.0f} |")
    out += ["", "The hostile requests (each run's answer; seconds, status, response bytes):", "",
            "| request | old | new |", "| --- | --- | --- |"]
    for name in ("hostile JSON", "hostile imports"):
        for i, answer in enumerate(runs["old"][0][name]["answers"]):
            cells = []
            for k in ("old", "new"):
                seen = [run[name]["answers"][i] for run in runs[k] if i < len(run[name]["answers"])]
                cells.append("; ".join(f"{a['s']:.2f} s, {a['status']}, {a['size']:,} B" for a in seen))
            out.append(f"| {answer['name']} | {cells[0]} | {cells[1]} |")
    loads = "; ".join(f"{k}: {run['quiet']['load']}" for k in ("old", "new") for run in runs[k])
    out += ["", f"Load average (1/5/15 min) when each run started: {loads}."]
    return "\n".join(out)
