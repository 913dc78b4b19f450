"""`make bench-deliveries`: webhook deliveries from the outbox (issue 47 item 9), main's code before the fix against
this commit, in one run on loopback receivers (each side a fresh `lev serve` with its worker inline; the old side is
`git archive` of its commit in the virtualenv its own Makefile builds, on this commit's additive schema).

1. One healthy endpoint: 1,000 events put in the outbox as committed ingests put them (each event and its delivery
   in a transaction of its own, one after another), with no nudge: the sender finds them by its sweep. Figures:
   deliveries per second from the first to the last, and the longest pause between two deliveries.
2. The same beside a failing endpoint's backlog: 1,440 due retries of an endpoint that answers 500 after 0.2 s
   (older than the healthy events, as a long-lived instance holds them), then 1,000 events for the healthy one.
   Figures: the healthy endpoint's deliveries per second, and how many it had in the first 30 s.

`LEV_BENCH_SIDES=new` (or `old`) runs one side; `LEV_BENCH_DELIVERIES_OLD` names the old commit.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.common import ROOT, cleanup, old_tree_at, own_python, start_lev
from tests.fixtures_feeds import WebhookReceiver

OLD = os.environ.get("LEV_BENCH_DELIVERIES_OLD", "956d45c")  # main before this fix
EVENTS = 1000
BACKLOG = 1440
FAILING_DELAY_SEC = 0.2
FIRST_WINDOW_SEC = 30.0
WAIT_SEC = 240.0  # the most a side waits for its healthy deliveries (the old one may never finish them)


def _db(lev: Any) -> str:
    from lev.embedded import resolve_urls

    url, _ = resolve_urls(None, None, lev.data_dir)
    return "postgresql://" + url.split("://", 1)[1]


def _queue_events(db: str, user_id: Any, webhook_id: str, tag: str, n: int) -> None:
    """`n` events for one endpoint, each committed in its own transaction with its delivery (what an ingest's
    transaction writes), and no message to the senders."""
    with psycopg.connect(db) as conn:
        for k in range(n):
            event = f"msg_bench_{tag}_{k:05d}"
            with conn.transaction():
                conn.execute("INSERT INTO webhook_events (id, user_id, type, payload) VALUES (%s, %s, 'item.ready', "
                             "%s::jsonb)", (event, user_id, f'{{"type": "item.ready", "data": {{"n": {k}}}}}'))
                conn.execute("INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts) VALUES "
                             "(%s, %s, %s, 'pending', 0)", (uuid.uuid4(), webhook_id, event))


def _backlog(db: str, user_id: Any, webhook_id: str, n: int) -> None:
    """`n` retries of a failing endpoint, due over the last two hours (older than any event queued after)."""
    with psycopg.connect(db) as conn, conn.transaction():
        conn.execute("UPDATE webhooks SET failing_since = now() - interval '2 hours' WHERE id = %s", (webhook_id,))
        conn.execute(
            "INSERT INTO webhook_events (id, user_id, type, payload) SELECT 'msg_backlog_' || g, %s, 'item.ready', "
            "'{\"type\": \"item.ready\"}'::jsonb FROM generate_series(1, %s) g", (user_id, n))
        conn.execute(
            "INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts, next_attempt_at, created_at) "
            "SELECT gen_random_uuid(), %s, 'msg_backlog_' || g, 'pending', 2, now() - interval '2 hours' "
            "+ g * interval '4 seconds', now() - interval '3 hours' FROM generate_series(1, %s) g", (webhook_id, n))


def _healthy(receiver: WebhookReceiver, before: int, started: float) -> dict[str, Any]:
    """Wait (up to WAIT_SEC) for the EVENTS deliveries after `before`; their rate, longest pause and first-window
    count."""
    try:
        receiver.wait_for(lambda ds: len(ds) >= before + EVENTS, timeout=WAIT_SEC)
    except AssertionError:
        pass
    at = [d.at for d in receiver.deliveries[before:]]
    if not at:
        return {"received": 0, "rate": 0.0, "gap": WAIT_SEC, "first": 0}
    span = at[-1] - at[0]
    gap = max((b - a for a, b in zip(at, at[1:], strict=False)), default=0.0)
    return {"received": len(at), "rate": (len(at) - 1) / span if span > 0 else 0.0, "gap": gap,
            "first": sum(1 for t in at if t - started <= FIRST_WINDOW_SEC), "span": span}


def side(root: Path) -> dict[str, Any]:
    lev = start_lev(root=root, python=own_python(root))
    healthy, failing = WebhookReceiver(), WebhookReceiver()
    failing.delay = FAILING_DELAY_SEC
    failing.statuses = [500] * (BACKLOG * 4)
    out: dict[str, Any] = {}
    try:
        c = httpx.Client(base_url=lev.url, headers=lev.headers(), timeout=60)
        hook = c.post("/api/v1/webhooks", json={"url": healthy.url, "events": ["item.ready"]}).json()["id"]
        db = _db(lev)
        out["load_alone"] = os.getloadavg()[0]
        _queue_events(db, lev.user_id, hook, "alone", EVENTS)
        out["alone"] = _healthy(healthy, 0, time.time())

        bad = c.post("/api/v1/webhooks", json={"url": failing.url, "events": ["item.ready"]}).json()["id"]
        _backlog(db, lev.user_id, bad, BACKLOG)
        out["load_beside"] = os.getloadavg()[0]
        before = len(healthy.deliveries)
        started = time.time()
        _queue_events(db, lev.user_id, hook, "beside", EVENTS)
        out["beside"] = _healthy(healthy, before, started)
        out["failing"] = {"attempts": len(failing.deliveries)}
    finally:
        healthy.close()
        failing.close()
        cleanup(lev)
    return out


def main() -> str:
    sides = os.environ.get("LEV_BENCH_SIDES", "old,new").split(",")
    runs = {k: side(old_tree_at(OLD) if k == "old" else ROOT) for k in ("old", "new") if k in sides}

    def cells(part: str, key: str, fmt: str) -> str:
        return " | ".join(format(runs[k][part][key], fmt) if k in runs else "" for k in ("old", "new"))

    lines = [f"Old: `git archive {OLD}` (main before issue 47 item 9); new: this commit. Each side a fresh "
             "`lev serve` (worker inline, embedded PostgreSQL and Redis), old first; events committed one by one "
             "as ingests commit them, no nudge (the sender's sweep finds them).", "",
             "| figure | old | new | goal |", "| --- | --- | --- | --- |",
             f"| {EVENTS:,} queued events, one healthy endpoint: deliveries per second | "
             f"{cells('alone', 'rate', '.1f')} | ≥ 200 |",
             f"| the same: longest pause between two deliveries, s | {cells('alone', 'gap', '.2f')} | |",
             f"| beside {BACKLOG:,} due retries of a failing endpoint: the healthy one's deliveries per second | "
             f"{cells('beside', 'rate', '.1f')} | ≥ 200 |",
             f"| the same: healthy deliveries received (of {EVENTS:,}, within {WAIT_SEC:g} s) | "
             f"{cells('beside', 'received', ',')} | {EVENTS:,} |",
             f"| the same: healthy deliveries in the first {FIRST_WINDOW_SEC:g} s after the events were queued | "
             f"{cells('beside', 'first', ',')} | {EVENTS:,} |",
             f"| the same: longest pause, s | {cells('beside', 'gap', '.2f')} | |",
             f"| the failing endpoint's attempts meanwhile | {cells('failing', 'attempts', ',')} | |", "",
             "Load average (1 min) when each part started: " + "; ".join(
                 f"{k}: alone {runs[k]['load_alone']:.2f}, beside {runs[k]['load_beside']:.2f}" for k in runs)
             + "."]
    return "\n".join(lines)
