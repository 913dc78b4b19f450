"""Issue 38: one user, one feed or one document against everyone else, this commit against the commit before the
work (`OLD`, 57af0a9), in the same run on the same machine, a fresh stack (worker inline) for every phase.

In each phase user A does one hostile thing while `/healthz` is asked every 20 ms and user B saves a short note
every second (its note-to-ready time: the ingest answers `ready` or B polls until it is); the phase lasts until A's
requests are answered, then `AFTER_SEC` more (the worker's share of the damage). Phases: quiet; feed (A follows and
refreshes a 20,000-entry feed); capture (A saves a 5 MiB page of `"` characters); note (A, a browser session that
signed itself up, saves a 1,000,000-character note of `a.`); OPML (A imports two OPML files of 12 feeds that each
drip for 25 s, and B also follows a healthy feed). After the capture and note phases the server gets SIGTERM and the
time to its exit is measured (LEV_SHUTDOWN_GRACE_SEC 30 s).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.common import ROOT, cleanup, old_tree_at, own_python, pct, start_lev
from tests.fixtures_feeds import FeedEntry, FeedSite
from tests.stack import new_user

OLD = os.environ.get("LEV_BENCH_FAIR_OLD", "57af0a9")  # main before issue 38 (issue 47's phase: before its work)
AFTER_SEC = 30.0
TIMEOUT = 600.0
ENV = {"LEV_LIMIT_SIGN_UP_IP": "1000/hour", "LEV_SHUTDOWN_GRACE_SEC": "30"}
QUOTES_HTML = "<html><body><p>" + '"' * (5 * 1024 * 1024 - 64) + "</p></body></html>"
NOTE = "a." * 500_000


def _rss(proc: psutil.Process) -> float:
    try:
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]
                   if "postgres" not in p.name() and "redis" not in p.name()) / 2**20
    except psutil.Error:
        return 0.0


def _note_ready(c: httpx.Client, n: int) -> float:
    started = time.perf_counter()
    r = c.post("/api/v1/ingest", json={"kind": "text", "title": f"B {n}", "text": f"Tides follow the moon {n}."})
    if r.status_code != 200:
        return float("nan")
    item = r.json()["user_item_id"]
    while r.json().get("status") != "ready" and time.perf_counter() - started < TIMEOUT:
        time.sleep(0.2)
        r = c.get(f"/api/v1/items/{item}")
    return (time.perf_counter() - started) * 1000


def phase(url: str, proc: psutil.Process, token_b: str, action: Callable[[], list[str]]) -> dict[str, Any]:
    """Run `action` (A's requests; it returns what they answered) while probing; then AFTER_SEC more."""
    stop = threading.Event()
    probes: list[float] = []
    notes: list[float] = []
    rss = [_rss(proc)]

    def probe() -> None:
        with httpx.Client(base_url=url, timeout=TIMEOUT) as c:
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    c.get("/healthz")
                    probes.append((time.perf_counter() - started) * 1000)
                except httpx.HTTPError:
                    probes.append(float("nan"))
                rss.append(_rss(proc))
                time.sleep(0.02)

    def note() -> None:
        with httpx.Client(base_url=url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token_b}"}) as c:
            n = 0
            while not stop.is_set():
                try:
                    notes.append(_note_ready(c, n))
                except httpx.HTTPError:
                    notes.append(float("nan"))
                n += 1
                time.sleep(1.0)

    threads = [threading.Thread(target=probe, daemon=True), threading.Thread(target=note, daemon=True)]
    for t in threads:
        t.start()
    started = time.perf_counter()
    answers = action()
    took = time.perf_counter() - started
    stop.wait(AFTER_SEC)
    stop.set()
    for t in threads:
        t.join(TIMEOUT)
    return {"probes": [p for p in probes if p == p], "failed": sum(1 for p in probes if p != p),
            "notes": [n for n in notes if n == n], "notes_failed": sum(1 for n in notes if n != n),
            "answers": answers, "took": took, "rss": max(rss)}


def _answer(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return f"{r.status_code}"
    detail = body.get("error") or body.get("status") or ""
    return f"{r.status_code} {detail}".strip()


def feed_action(url: str, token: str, site: FeedSite) -> Callable[[], list[str]]:
    def act() -> list[str]:
        feed_url = site.add("huge", "rss", [FeedEntry(n) for n in range(40_000, 20_000, -1)])
        with httpx.Client(base_url=url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"}) as c:
            started = time.perf_counter()
            r = c.post("/api/v1/feeds", json={"url": feed_url})
            out = [f"follow: {_answer(r)} in {time.perf_counter() - started:.1f} s"]
            if r.status_code == 201:
                feed = r.json()
                c.post(f"/api/v1/feeds/{feed['id']}/refresh")
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    now = c.get(f"/api/v1/feeds/{feed['id']}").json()
                    if now["last_checked_at"] != feed["last_checked_at"]:
                        break
                    time.sleep(1)
                out.append(f"after a refresh: {now['status']}, last_error {now['last_error']!r}")
        return out
    return act


def capture_action(url: str, token: str) -> Callable[[], list[str]]:
    def act() -> list[str]:
        with httpx.Client(base_url=url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"}) as c:
            started = time.perf_counter()
            r = c.post("/api/v1/ingest", json={"kind": "page", "url": "https://example.com/quotes",
                                               "html": QUOTES_HTML})
            return [f"capture: {_answer(r)} in {time.perf_counter() - started:.1f} s"]
    return act


def note_action(url: str) -> Callable[[], list[str]]:
    def act() -> list[str]:
        with httpx.Client(base_url=url, timeout=TIMEOUT) as web:
            r = web.post("/api/account/signup", json={"email": f"a{time.time_ns()}@example.com",
                                                      "password": "correct horse battery"})
            csrf = {"X-CSRF-Token": r.json().get("csrf_token", "")}
            started = time.perf_counter()
            r = web.post("/api/v1/ingest", headers=csrf, json={"kind": "text", "title": "A", "text": NOTE})
            return [f"signed-up session's note: {_answer(r)} in {time.perf_counter() - started:.1f} s"]
    return act


def prose(chars: int) -> str:
    """Readable sentences (every chunk embeds at full width, unlike a run of one character)."""
    words = ["tide", "moon", "shell", "rock", "pool", "kelp", "crab", "wave", "sand", "gull", "salt", "foam"]
    out: list[str] = []
    n = 0
    while sum(map(len, out)) < chars:
        out.append(" ".join(words[(n * 7 + k) % 12] for k in range(n % 5 + 8)).capitalize() + ". ")
        n += 1
    return "".join(out)[:chars]


def big_notes_action(url: str, token: str) -> Callable[[], list[str]]:
    """Issue 47 item 4: A's 1,000,000- and 200,000-character notes of prose embed while B saves short notes."""
    def act() -> list[str]:
        with httpx.Client(base_url=url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"}) as c:
            out = []
            for chars in (1_000_000, 200_000):
                started = time.perf_counter()
                r = c.post("/api/v1/ingest", json={"kind": "text", "title": f"A {chars}", "text": prose(chars)})
                out.append(f"{chars:,}-character note: {_answer(r)} in {time.perf_counter() - started:.1f} s")
            return out
    return act


def opml_action(url: str, token: str, token_b: str, site: FeedSite) -> Callable[[], list[str]]:
    def act() -> list[str]:
        names = [f"drip{n}" for n in range(24)]
        for n in names:
            site.add(n, "rss", [FeedEntry(1)])
        out: list[str] = []

        def run(part: list[str]) -> None:
            body = "".join(f'<outline text="{n}" xmlUrl="{site.url}/drip/25/{n}"/>' for n in part)
            doc = f'<?xml version="1.0"?><opml version="2.0"><body>{body}</body></opml>'.encode()
            with httpx.Client(base_url=url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"}) as c:
                started = time.perf_counter()
                r = c.post("/api/v1/feeds/opml", files={"file": ("subs.opml", doc)})
                out.append(f"OPML import: {_answer(r)} in {time.perf_counter() - started:.1f} s")

        threads = [threading.Thread(target=run, args=(names[:12],)), threading.Thread(target=run, args=(names[12:],))]
        for t in threads:
            t.start()
        time.sleep(3)
        with httpx.Client(base_url=url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token_b}"}) as c:
            started = time.perf_counter()
            r = c.post("/api/v1/feeds", json={"url": site.add("healthy", "rss", [FeedEntry(5)])})
            out.append(f"B follows a healthy feed meanwhile: {_answer(r)} in {time.perf_counter() - started:.1f} s")
        for t in threads:
            t.join(TIMEOUT)
        return out
    return act


def _quiet() -> list[str]:
    time.sleep(10)
    return []


def _sigterm(proc: Any) -> float:
    started = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(120)
    except Exception:
        proc.kill()
    return time.perf_counter() - started


def side(root: Path, name: str) -> dict[str, Any]:
    lev = start_lev(ENV, root=root, python=own_python(root))
    proc = psutil.Process(lev.server.proc.pid)  # type: ignore[union-attr]
    site = FeedSite()
    try:
        token_b = new_user(lev.admin).token(write=True, write_cap=0, name="b")
        action: Callable[[], list[str]] = {
            "quiet": _quiet,
            "feed": feed_action(lev.url, lev.token, site),
            "capture": capture_action(lev.url, lev.token),
            "note": note_action(lev.url),
            "big notes": big_notes_action(lev.url, lev.token),
            "OPML": opml_action(lev.url, lev.token, token_b, site)}[name]
        out = phase(lev.url, proc, token_b, action)
        out["load"] = " / ".join(f"{x:.1f}" for x in os.getloadavg())
        if name in ("capture", "note"):
            out["sigterm"] = _sigterm(lev.server.proc)
    finally:
        site.close()
        cleanup(lev)
    return out


PHASES = tuple(os.environ.get("LEV_BENCH_FAIR_PHASES", "quiet,feed,capture,note,OPML").split(","))


def main() -> str:
    roots = {"old": old_tree_at(OLD), "new": ROOT}
    runs = {(p, k): side(roots[k], p) for p in PHASES for k in ("old", "new")}
    out = [f"### One user, feed or document against everyone: this commit vs {OLD}", "",
           f"Old code: `git archive {OLD}` in its own virtualenv. A fresh stack per phase and side (worker inline), "
           "one run each. `/healthz` is asked every 20 ms (ms); user B saves a short note every second (note to "
           f"ready, ms); a phase lasts until user A's requests are answered, then {AFTER_SEC:g} s more.", "",
           "| phase | side | /healthz p50 / p99 (ms) | max | B's note p50 / p95 / p99 (ms) | notes (failed) | RSS peak "
           "(MiB) | A's requests |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in PHASES:
        for k in ("old", "new"):
            r = runs[(p, k)]
            h, n = pct(r["probes"] or [float("nan")]), pct(r["notes"] or [float("nan")])
            out.append(f"| {p} | {k} | {h['p50']:.1f} / {h['p99']:.1f} | {max(r['probes'] or [0]):.0f} | "
                       f"{n['p50']:.0f} / {n['p95']:.0f} / {n['p99']:.0f} | {len(r['notes'])} ({r['notes_failed']}) | "
                       f"{r['rss']:.0f} | "
                       f"{'; '.join(r['answers']) or '-'} |")
    stops = "; ".join(f"{k} after {p}: {runs[(p, k)]['sigterm']:.1f} s" for p in ("capture", "note")
                      for k in ("old", "new") if (p, k) in runs)
    loads = "; ".join(f"{p} {k}: {runs[(p, k)]['load']}" for p in PHASES for k in ("old", "new"))
    out += ["", f"SIGTERM to exit, with the phase's work still running (grace 30 s): {stops}.", "",
            f"Load average (1/5/15 min) at the end of each phase: {loads}."]
    return "\n".join(out)
