"""The webhook outbox survives its worker's kill -9 mid-delivery (the event arrives again with the same webhook-id
once a new worker runs) and the loss of every queued job in Redis (the sweep finds the committed deliveries);
each committed item.ready is one event, none invented. With private addresses refused, a delivery to an address
that became private is refused at connect time, and the endpoint cap answers 409 limit_reached."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from tests.fixtures_feeds import WebhookReceiver
from tests.fixtures_worker import SplitStack


@pytest.fixture(scope="module")
def stack() -> Iterator[SplitStack]:
    s = SplitStack({"LEV_ALLOW_PRIVATE_URLS": "false", "LEV_PRIVATE_URL_ALLOWLIST": '["127.0.0.1/32"]',
                    "LEV_WEBHOOK_MAX_PER_USER": "2"})
    s.start_worker()
    yield s
    s.close()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    r = WebhookReceiver()
    yield r
    r.close()


def client(stack: SplitStack, email: str) -> httpx.Client:
    return httpx.Client(base_url=stack.server.url, headers={"Authorization": f"Bearer {stack.token(email)}"},
                        timeout=120)


def attempts(c: httpx.Client, hook_id: str, pred: Any, timeout: float = 120) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        found: list[dict[str, Any]] = c.get(f"/api/v1/webhooks/{hook_id}/deliveries").json()["deliveries"]
        if pred(found):
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.5)


def test_kill_9_mid_delivery_and_lost_jobs_lose_no_event(stack: SplitStack, receiver: WebhookReceiver) -> None:
    c = client(stack, "outbox@example.com")
    hook = c.post("/api/v1/webhooks", json={"url": receiver.url, "events": ["item.ready"]}).json()
    receiver.delay = 8.0  # the receiver holds the first delivery open (within the 10 s) while its worker dies
    first = c.post("/api/v1/ingest", json={"kind": "text", "text": "Kestrels hover against the wind."}).json()
    receiver.wait_for(lambda ds: len(ds) == 1, timeout=300)  # the worker may take a while to start on a busy machine
    stack.kill_worker()
    receiver.delay = 0.0
    stack.start_worker()
    got = receiver.wait_for(lambda ds: len(ds) == 2, timeout=180)
    assert got[0].headers["webhook-id"] == got[1].headers["webhook-id"]  # the same event, delivered again
    body = Webhook(hook["secret"]).verify(got[1].body, got[1].headers)
    assert body["data"]["item_id"] == first["user_item_id"]
    (done,) = attempts(c, hook["id"], lambda ds: len(ds) == 1)  # the killed attempt never finished
    assert (done["status"], done["status_code"]) == ("succeeded", 200), done["error"]

    # jobs lost with Redis: the committed deliveries wait in PostgreSQL and the sweep finds them
    stack.stop_worker()
    made = [c.post("/api/v1/ingest", json={"kind": "text", "text": f"Note {n} about starlings."}).json()
            for n in range(3)]
    stack.redis().flushall()
    stack.start_worker()
    got = receiver.wait_for(lambda ds: len(ds) == 5, timeout=180)
    delivered = {Webhook(hook["secret"]).verify(d.body, d.headers)["data"]["item_id"] for d in got[2:]}
    assert delivered == {m["user_item_id"] for m in made}
    time.sleep(3)
    assert len(receiver.deliveries) == 5
    # one event per committed item.ready: none invented
    rows = stack.sql("SELECT payload->'data'->>'item_id', count(*) FROM webhook_events GROUP BY 1")
    assert sorted(rows) == sorted((i, 1) for i in [first["user_item_id"], *(m["user_item_id"] for m in made)])


def test_a_delivery_to_a_refused_address_is_refused_when_it_connects(stack: SplitStack,
                                                                    receiver: WebhookReceiver) -> None:
    if stack.worker is None:
        stack.start_worker()
    c = client(stack, "guard@example.com")
    hook = c.post("/api/v1/webhooks", json={"url": receiver.url, "events": ["item.ready"]}).json()
    # the endpoint's name now leads somewhere private (as a DNS change would): every attempt checks again
    port = receiver.url.split(":")[2].split("/")[0]
    stack.sql("UPDATE webhooks SET url = %(u)s WHERE id = %(w)s", u=f"http://127.0.0.2:{port}/hook", w=hook["id"])
    assert c.post(f"/api/v1/webhooks/{hook['id']}/test").status_code == 202
    (attempt,) = attempts(c, hook["id"], lambda ds: len(ds) == 1)
    assert attempt["status_code"] is None and attempt["status"] == "retrying"
    assert "non-public address (127.0.0.2)" in attempt["error"], attempt
    assert receiver.deliveries == []

    assert c.post("/api/v1/webhooks", json={"url": receiver.url, "events": ["item.ready"]}).status_code == 201
    r = c.post("/api/v1/webhooks", json={"url": receiver.url, "events": ["item.ready"]})
    assert r.status_code == 409, r.text
    assert (r.json()["error"], r.json()["cap"], r.json()["used"]) == ("limit_reached", 2, 2)
