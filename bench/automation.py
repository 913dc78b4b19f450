"""`make bench-automation`: feeds and webhooks under load, on loopback stand-ins.

1. 1,000 followed feeds polled with nothing new (each answers 304 to its ETag): polls per second, the server's
   CPU per poll, and the p95 of searches run during the polls beside the same searches with nothing polling.
2. Webhook latency from an item's `item.ready` committed (its ingest answered) to the receiver, p50/p95, and the
   throughput of 1,000 deliveries queued at once.

The old commit (84739d0) has neither feeds nor webhooks, so there is nothing of it to run beside these figures.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

import httpx
import psutil

from bench.common import cleanup, fmt_pct, pct, start_lev
from tests.fixtures_feeds import FeedSite, WebhookReceiver

FEEDS = 1000
QUERIES = ["volcanoes and magma", "sourdough starter", "quantum entanglement", "tide pools", "bridge design"]


def _cpu(pid: int) -> float:
    proc = psutil.Process(pid)
    total = sum(proc.cpu_times()[:2])
    for child in proc.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return float(total)


def _searches(c: httpx.Client, stop: threading.Event, out: list[float]) -> None:
    n = 0
    while not stop.is_set():
        started = time.perf_counter()
        c.get("/api/v1/search", params={"q": QUERIES[n % len(QUERIES)], "limit": 10})
        out.append((time.perf_counter() - started) * 1000)
        n += 1


def _timed_searches(c: httpx.Client, seconds: float) -> list[float]:
    stop, out = threading.Event(), []  # type: ignore[var-annotated]
    t = threading.Thread(target=_searches, args=(c, stop, out))
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    return out


def feeds_part(lev: Any, c: httpx.Client) -> list[str]:
    site = FeedSite()
    try:
        for n in range(FEEDS):
            site.add(f"b{n}", "rss", [])
        rows = ", ".join(f"('{uuid.uuid4()}', '{lev.user_id}', '{site.url}/feeds/b{n}', 'Feed {n}', false, 0, "
                         f"'\"v0\"', now() + interval '1 hour', 0)" for n in range(FEEDS))
        lev.admin.sql("INSERT INTO feeds (id, user_id, url, feed_title, paused, failures, etag, next_poll_at, "
                      f"entries_ingested) VALUES {rows}")
        idle = _timed_searches(c, 20)
        cpu0 = _cpu(lev.server.proc.pid)
        lev.admin.sql("UPDATE feeds SET next_poll_at = now()")  # all due: the next schedule queues them
        stop, during = threading.Event(), []  # type: ignore[var-annotated]
        t = threading.Thread(target=_searches, args=(c, stop, during))
        t.start()
        deadline = time.monotonic() + 900
        while lev.admin.sql("SELECT count(*) FROM feeds WHERE last_checked_at IS NULL")[0][0] > 0:
            assert time.monotonic() < deadline, "the polls did not finish in 15 minutes"
            time.sleep(1)
        stop.set()
        t.join()
        cpu = _cpu(lev.server.proc.pid) - cpu0
        first, last = lev.admin.sql("SELECT min(last_checked_at), max(last_checked_at) FROM feeds")[0]
        span = (last - first).total_seconds()
        not_modified = sum(1 for _, status, _ in site.hits if status == 304)
        failed = lev.admin.sql("SELECT count(*) FROM feeds WHERE failures > 0")[0][0]
        pi, pd = pct(idle), pct(during)
        return [
            "### 1,000 feeds polled with nothing new",
            "",
            f"{FEEDS} feeds on a loopback feed server, each answering 304 to the ETag of its last fetch; all made "
            "due at once, queued by the schedule (one `poll_feed` job each) and run by the inline worker (4 jobs "
            "at a time) while one client searched back to back.",
            "",
            "| figure | value |",
            "| --- | --- |",
            f"| polls | {FEEDS} ({not_modified} answered 304, {failed} failed) |",
            f"| first to last check | {span:.1f} s |",
            f"| polls per second | **{FEEDS / span:.1f}** |",
            f"| server CPU per poll (API + worker process, user + system) | **{cpu / FEEDS * 1000:.1f} ms** |",
            f"| search p50 / p95 / p99, nothing polling (n={pi['n']}) | {fmt_pct(pi)} ms |",
            f"| search p50 / p95 / p99, during the polls (n={pd['n']}) | {fmt_pct(pd)} ms |",
            "",
        ]
    finally:
        site.close()


def webhooks_part(lev: Any, c: httpx.Client) -> list[str]:
    receiver = WebhookReceiver()
    try:
        hook = c.post("/api/v1/webhooks", json={"url": receiver.url, "events": ["item.ready"]}).json()
        latencies = []
        for n in range(60):
            r = c.post("/api/v1/ingest", json={"kind": "text", "text": f"Latency note {n} about kestrels."})
            committed = time.time()
            assert r.status_code == 200, r.text
            got = receiver.wait_for(lambda ds, k=n: len(ds) == k + 1, timeout=60)
            latencies.append((got[-1].at - committed) * 1000)
        lat = pct(latencies)
        before = len(receiver.deliveries)
        event_rows = ", ".join(
            f"('msg_bench{n:04d}', '{lev.user_id}', 'item.ready', "
            f"'{{\"type\": \"item.ready\", \"timestamp\": \"2026-01-01T00:00:00Z\", \"data\": {{\"n\": {n}}}}}')"
            for n in range(1000))
        lev.admin.sql(f"INSERT INTO webhook_events (id, user_id, type, payload) VALUES {event_rows}")
        lev.admin.sql("INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts) "
                      "SELECT gen_random_uuid(), :w, id, 'pending', 0 FROM webhook_events WHERE id LIKE 'msg_bench%'",
                      w=hook["id"])
        got = receiver.wait_for(lambda ds: len(ds) >= before + 1000, timeout=900)
        batch = got[before:]
        span = batch[-1].at - batch[0].at
        return [
            "### Webhook delivery",
            "",
            "A receiver on loopback answering 200 at once. Latency: 60 text ingests one after another, each from "
            "its ingest's answer (the transaction holding `item.ready` committed) to the receiver's arrival.",
            "Throughput: 1,000 deliveries written to the outbox in one transaction (as a burst of events would be) "
            "and found by the sweep; from the first arrival to the last.",
            "",
            "| figure | value |",
            "| --- | --- |",
            f"| item.ready committed to receiver, p50 / p95 / p99 | **{fmt_pct(lat)} ms** |",
            f"| 1,000 queued deliveries: first to last arrival | {span:.1f} s |",
            f"| deliveries per second | **{1000 / span:.1f}** |",
            "",
        ]
    finally:
        receiver.close()


def main() -> str:
    lev = start_lev()
    try:
        c = httpx.Client(base_url=lev.url, headers=lev.headers(), timeout=120)
        for n in range(40):
            c.post("/api/v1/ingest", json={"kind": "text", "text": f"{QUERIES[n % 5]} note {n}: " + "words " * 50})
        load = os.getloadavg()[0]
        lines = feeds_part(lev, c) + webhooks_part(lev, c)
        lines.append(f"Load average (1 min) at the start and the end: {load:.1f} and {os.getloadavg()[0]:.1f}.")
    finally:
        cleanup(lev)
    return "\n".join([__doc__.split("\n\n", 1)[1].strip(), "", *lines])
