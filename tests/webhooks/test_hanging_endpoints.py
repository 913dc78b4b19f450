"""Receivers that hang hold no shared slot (issue 38, issue 40 item 2): twenty endpoints of one user that never
answer (each attempt runs into the 10 s timeout) keep their own attempts open, and meanwhile another user's
ingest finishes its worker job (the AI outputs) and that user's `item.ready` reaches their endpoint, before any of
the hanging attempts has ended. One item's events reach an endpoint in order, so each holds the created events of
the three notes open (60 attempts), their ready events queued behind them."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.fixtures_feeds import WebhookReceiver
from tests.stack import Admin, new_user


@pytest.fixture
def hanging() -> Iterator[WebhookReceiver]:
    r = WebhookReceiver()
    r.delay = 60.0  # longer than Lev waits: every attempt ends by Lev's timeout
    yield r
    r.close()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    r = WebhookReceiver()
    yield r
    r.close()


def test_twenty_hanging_endpoints_slow_no_one_else(api, admin: Admin, hanging: WebhookReceiver,
                                                     receiver: WebhookReceiver) -> None:
    stuck = new_user(admin)
    a = api(stuck.token(write=True))
    hooks = []
    for _ in range(20):
        r = a.post("/api/v1/webhooks", json={"url": hanging.url, "events": ["item.created", "item.ready"]})
        assert r.status_code == 201, r.text
        hooks.append(r.json()["id"])
    try:
        for n in range(3):
            r = a.post("/api/v1/ingest", json={"kind": "text", "text": f"Hanging note {n} about herons.",
                                               "auto_transform": False})
            assert r.status_code == 200, r.text
        # every endpoint's item.created of each note open at once (60); each item.ready waits behind its item's
        # created event (one item's events go out in order)
        hanging.wait_for(lambda ds: len(ds) >= 60, timeout=60)

        other = new_user(admin)
        b = api(other.token(write=True))
        hook = b.post("/api/v1/webhooks", json={"url": receiver.url, "events": ["item.ready"]}).json()
        r = b.post("/api/v1/ingest", json={"kind": "text", "title": "Wrens",
                                           "text": "Wrens sing loudly for their size. " * 20})
        assert r.status_code == 200, r.text
        item = r.json()["user_item_id"]
        (told,) = receiver.wait_for(lambda ds: len(ds) == 1, timeout=60)
        assert item.encode() in told.body
        deadline = time.monotonic() + 60
        while not b.get(f"/api/v1/items/{item}").json()["outputs"]:  # the transform job ran on the worker
            assert time.monotonic() < deadline, "the other user's transform job did not run"
            time.sleep(0.2)
        ended = admin.sql("SELECT count(*) FROM webhook_attempts a JOIN webhooks w ON w.id = a.webhook_id "
                          "WHERE w.user_id = :u", u=stuck.id)[0][0]
        assert ended == 0, "the other user's work waited for hanging attempts to time out"
        assert len(b.get(f"/api/v1/webhooks/{hook['id']}/deliveries").json()["deliveries"]) == 1
    finally:
        for h in hooks:
            a.delete(f"/api/v1/webhooks/{h}")
