"""Webhooks in the cluster (issue 40 item 2): a burst of deliveries written to the outbox at once is delivered by
the senders of both workers, each event exactly once, none lost."""

from __future__ import annotations

import json
import time

from standardwebhooks.webhooks import Webhook

from tests.cluster.conftest import Ops
from tests.fixtures_feeds import WebhookReceiver

BURST = 300


def test_a_burst_of_deliveries_is_spread_over_the_workers(ops: Ops) -> None:
    receiver = WebhookReceiver()
    try:
        c = ops.client(ops.token())
        hook = c.post("/api/v1/webhooks", json={"url": receiver.url, "events": ["item.ready"]}).json()
        user_id = ops.sql("SELECT user_id FROM webhooks WHERE id = %s", hook["id"])[0][0]
        before = {n: (ops.c.base / f"worker{n}.log").read_text().count("webhook attempts recorded") for n in (1, 2)}
        with ops.db() as conn:
            conn.cursor().executemany(
                "INSERT INTO webhook_events (id, user_id, type, payload) VALUES (%s, %s, 'item.ready', %s)",
                [(f"msg_cluster{n:04d}", user_id, json.dumps({"type": "item.ready", "timestamp":
                                                              "2026-01-01T00:00:00Z", "data": {"n": n}}))
                 for n in range(BURST)])
            conn.execute("INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts) SELECT "
                         "gen_random_uuid(), %s, id, 'pending', 0 FROM webhook_events WHERE id LIKE 'msg_cluster%%'",
                         (hook["id"],))
        ops.redis.publish("lev:webhooks:due", "1")  # what a commit through Lev does
        got = receiver.wait_for(lambda ds: len(ds) >= BURST, timeout=300)
        ids = [d.headers["webhook-id"] for d in got]
        assert len(ids) == len(set(ids)) == BURST  # each event once
        assert all(Webhook(hook["secret"]).verify(d.body, d.headers)["type"] == "item.ready" for d in got)
        deadline = time.monotonic() + 60
        while ops.sql("SELECT count(*) FROM webhook_deliveries WHERE webhook_id = %s AND status <> 'succeeded'",
                      hook["id"])[0][0]:
            assert time.monotonic() < deadline, "the outcomes were not recorded"
            time.sleep(0.2)
        time.sleep(1)
        after = {n: (ops.c.base / f"worker{n}.log").read_text().count("webhook attempts recorded") for n in (1, 2)}
        logs = (ops.c.base / "worker1.log").read_text()[-3000:]
        assert all(after[n] > before[n] for n in (1, 2)), (before, after, logs)  # both workers' senders delivered
    finally:
        receiver.close()
