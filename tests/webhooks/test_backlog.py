"""A failing endpoint's backlog slows no one else (issue 47 item 9): one endpoint holds 1,440 due retries (older
than anything else due, as a long-lived instance keeps them) and answers each attempt with 500 after a second,
while another user's 100 events are put in the outbox. The healthy endpoint gets every one at once; before, the
claim looked only at the oldest 64 due rows, all the failing endpoint's, and took one of them a round (its cap)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.fixtures_feeds import WebhookReceiver
from tests.stack import Admin, new_user

BACKLOG = 1440
EVENTS = 100


@pytest.fixture
def failing() -> Iterator[WebhookReceiver]:
    r = WebhookReceiver()
    r.delay = 1.0
    r.statuses = [500] * 10_000
    yield r
    r.close()


@pytest.fixture
def healthy() -> Iterator[WebhookReceiver]:
    r = WebhookReceiver()
    yield r
    r.close()


def _queue(admin: Admin, user_id: uuid.UUID, webhook_id: str, tag: str, n: int, *, retries: bool) -> None:
    """`n` events with a delivery each to one endpoint, as the events' transactions write them (retries: due
    again after a failed attempt, over the last two hours)."""
    admin.sql("INSERT INTO webhook_events (id, user_id, type, payload) SELECT :tag || g, :u, 'item.ready', "
              "CAST('{\"type\": \"item.ready\"}' AS jsonb) FROM generate_series(1, :n) g", tag=tag, u=user_id, n=n)
    admin.sql("INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts, next_attempt_at) "
              "SELECT gen_random_uuid(), CAST(:w AS uuid), :tag || g, 'pending', :attempts, "
              "CASE WHEN :retries THEN now() - interval '2 hours' + g * interval '4 seconds' ELSE now() END "
              "FROM generate_series(1, :n) g", w=webhook_id, tag=tag, n=n, attempts=2 if retries else 0,
              retries=retries)


def test_a_failing_endpoints_backlog_slows_no_other_endpoint(api, admin: Admin, failing: WebhookReceiver,
                                                             healthy: WebhookReceiver) -> None:
    stuck = new_user(admin)
    a = api(stuck.token(write=True))
    bad = a.post("/api/v1/webhooks", json={"url": failing.url, "events": ["item.ready"]}).json()["id"]
    tag = f"msg_{uuid.uuid4().hex[:8]}_"
    try:
        admin.sql("UPDATE webhooks SET failing_since = now() - interval '2 hours' WHERE id = CAST(:w AS uuid)",
                  w=bad)
        _queue(admin, stuck.id, bad, tag + "b", BACKLOG, retries=True)
        failing.wait_for(lambda ds: len(ds) >= 1, timeout=60)  # the backlog is being worked through

        other = new_user(admin)
        b = api(other.token(write=True))
        good = b.post("/api/v1/webhooks", json={"url": healthy.url, "events": ["item.ready"]}).json()["id"]
        _queue(admin, other.id, good, tag + "h", EVENTS, retries=False)
        got = healthy.wait_for(lambda ds: len(ds) >= EVENTS, timeout=60)
        assert len({d.headers["webhook-id"] for d in got}) == EVENTS
        left = admin.sql("SELECT count(*) FROM webhook_deliveries WHERE webhook_id = CAST(:w AS uuid) AND "
                         "status = 'pending' AND next_attempt_at <= now()", w=bad)[0][0]
        assert left > BACKLOG - 200, left  # both at once: the backlog was still there all along
    finally:
        a.delete(f"/api/v1/webhooks/{bad}")  # its backlog goes with it
