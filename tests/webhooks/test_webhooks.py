"""Webhooks over REST against a loopback receiver: every delivery verified with the standardwebhooks package and
validated against openapi.yaml's top-level `webhooks`; item, import and feed events reach only the owner's
endpoints; retries with the same webhook-id, the deliveries list, test events and re-sends, secret rotation,
redirects refused, answers kept to 1 KB, the last attempt and the three-day disable; scope and bad input."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from standardwebhooks.webhooks import Webhook

from lev.core.contract import load_spec
from lev.webhooks.events import EVENT_TYPES
from tests.fixtures_feeds import Delivery, FeedEntry, FeedSite, WebhookReceiver
from tests.fixtures_imports import chromium_bookmarks
from tests.sites import Site
from tests.stack import Admin, User, new_user

ALL = ["item.created", "item.ready", "item.failed", "item.deleted", "import.finished", "feed.failing",
       "highlight.created", "highlight.deleted", "item.updated"]


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    r = WebhookReceiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def err(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["error"] == code and body.get("message"), body
    return body


def check(delivery: Delivery, secret: str) -> dict[str, Any]:
    """The delivery verified as any Standard Webhooks receiver would, and valid against the spec's `webhooks`."""
    body: dict[str, Any] = Webhook(secret).verify(delivery.body, delivery.headers)
    spec = load_spec()
    schema = spec["webhooks"][body["type"]]["post"]["requestBody"]["content"]["application/json"]["schema"]
    Draft202012Validator({**schema, "components": spec["components"]},
                         format_checker=Draft202012Validator.FORMAT_CHECKER).validate(body)
    assert delivery.headers["webhook-id"].startswith("msg_")
    assert abs(int(delivery.headers["webhook-timestamp"]) - time.time()) < 60
    return body


def add_hook(c: httpx.Client, url: str, events: list[str] | None = None) -> dict[str, Any]:
    r = c.post("/api/v1/webhooks", json={"url": url, "events": events or ALL, "description": "test"})
    assert r.status_code == 201, r.text
    hook: dict[str, Any] = r.json()
    assert hook["secret"].startswith("whsec_") and hook["enabled"] is True
    return hook


def of_type(kind: str, n: int = 1) -> Any:
    return lambda ds: sum(1 for d in ds if b'"type":"' + kind.encode() + b'"' in d.body) >= n


def deliveries(c: httpx.Client, hook_id: str, pred: Any, timeout: float = 60) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        found: list[dict[str, Any]] = c.get(f"/api/v1/webhooks/{hook_id}/deliveries").json()["deliveries"]
        if pred(found):
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.3)


def test_item_events_are_signed_valid_and_reach_only_the_owner(api, user: User, receiver: WebhookReceiver,
                                                               admin: Admin, site: Site) -> None:
    c = api(user.token(write=True, kb_only=False))
    hook = add_hook(c, receiver.url)
    assert "secret" not in c.get(f"/api/v1/webhooks/{hook['id']}").json()
    assert [h["id"] for h in c.get("/api/v1/webhooks").json()["webhooks"]] == [hook["id"]]
    assert hook["secret"] not in c.get("/api/v1/webhooks").text
    other = new_user(admin)
    theirs = api(other.token(write=True))
    theirs.post("/api/v1/ingest", json={"kind": "text", "text": "Someone else's note about otters."})

    folder = user.folder("Hooked")
    r = c.post("/api/v1/ingest", json={"kind": "text", "text": "Otters hold hands while they sleep.",
                                       "title": "Otters", "folder_id": folder})
    assert r.status_code == 200, r.text
    item = r.json()
    got = receiver.wait_for(lambda ds: of_type("item.created")(ds) and of_type("item.ready")(ds))
    bodies = [check(d, hook["secret"]) for d in got]
    assert {b["type"] for b in bodies} == {"item.created", "item.ready"}  # nothing of the other user's
    ready = next(b for b in bodies if b["type"] == "item.ready")
    assert ready["data"] == {"item_id": item["user_item_id"], "content_id": item["content_id"], "url": None,
                             "title": "Otters", "kind": "text", "status": "ready", "error": None,
                             "folder_ids": [folder]}
    assert len({d.headers["webhook-id"] for d in got}) == 2

    assert c.delete(f"/api/v1/items/{item['user_item_id']}").status_code == 200
    got = receiver.wait_for(of_type("item.deleted"))
    deleted = check(got[-1], hook["secret"])
    assert deleted["type"] == "item.deleted" and deleted["data"]["item_id"] == item["user_item_id"]

    # an import: its dead link is a failed item, and the import's end is told once
    data = chromium_bookmarks([("link", "Volcano", f"{site.url}/volcano"), ("link", "Gone", f"{site.url}/missing")])
    assert c.post("/api/v1/imports", files={"file": ("b.html", data)}).status_code == 202
    # deliveries of different items run side by side: import.finished may overtake the item.failed before it
    got = receiver.wait_for(lambda ds: of_type("import.finished")(ds) and of_type("item.failed")(ds), timeout=120)
    failed = [check(d, hook["secret"]) for d in got if b'"item.failed"' in d.body]
    assert [f["data"]["url"] for f in failed] == [f"{site.url}/missing"]
    assert "404" in failed[0]["data"]["error"] and failed[0]["data"]["status"] == "failed"
    finished = check(next(d for d in got if b'"import.finished"' in d.body), hook["secret"])
    assert (finished["data"]["total"], finished["data"]["done"], finished["data"]["failed"]) == (2, 1, 1)
    time.sleep(1)
    assert sum(1 for d in receiver.deliveries if b'"import.finished"' in d.body) == 1
    listed = c.get(f"/api/v1/webhooks/{hook['id']}/deliveries").json()["deliveries"]
    assert all(d["status"] == "succeeded" and d["status_code"] == 200 and d["attempt"] == 1 for d in listed)
    assert {d["event"] for d in listed} >= {"item.created", "item.ready", "item.deleted", "item.failed",
                                            "import.finished"}


def test_a_failing_receiver_is_retried_with_the_same_id_and_the_list_shows_it(api, user: User,
                                                                             receiver: WebhookReceiver) -> None:
    c = api(user.token(write=True))
    hook = add_hook(c, receiver.url, ["item.ready"])
    receiver.statuses = [500]
    c.post("/api/v1/ingest", json={"kind": "text", "text": "A note delivered on the second try."})
    got = receiver.wait_for(lambda ds: len(ds) >= 2, timeout=60)
    assert got[0].headers["webhook-id"] == got[1].headers["webhook-id"]
    assert 4 <= got[1].at - got[0].at < 30, got[1].at - got[0].at
    check(got[1], hook["secret"])
    listed = deliveries(c, hook["id"], lambda ds: len(ds) == 2)
    second, first = listed
    assert (first["attempt"], first["status"], first["status_code"]) == (1, "retrying", 500)
    assert first["error"] == "the endpoint answered HTTP 500" and first["next_attempt_at"]
    assert len(first["response"]) == 1024 and first["response"].startswith("receiver says no")
    assert (second["attempt"], second["status"], second["status_code"], second["error"]) == \
        (2, "succeeded", 200, None)
    assert second["event_id"] == first["event_id"] == got[0].headers["webhook-id"]
    assert all(isinstance(d["duration_ms"], int) for d in listed)


def test_test_event_resend_and_rotation(api, user: User, receiver: WebhookReceiver) -> None:
    c = api(user.token(write=True))
    hook = add_hook(c, receiver.url, ["item.deleted"])
    r = c.post(f"/api/v1/webhooks/{hook['id']}/test")
    assert r.status_code == 202, r.text
    queued = r.json()
    (first,) = receiver.wait_for(lambda ds: len(ds) == 1)
    body = check(first, hook["secret"])
    assert body["type"] == "webhook.test" and body["data"]["webhook_id"] == hook["id"]
    assert first.headers["webhook-id"] == queued["event_id"]
    (attempt,) = deliveries(c, hook["id"], lambda ds: len(ds) == 1)
    r = c.post(f"/api/v1/webhooks/{hook['id']}/deliveries/{attempt['id']}/resend")
    assert r.status_code == 202 and r.json()["event_id"] == queued["event_id"], r.text
    again = receiver.wait_for(lambda ds: len(ds) == 2)[1]
    assert again.headers["webhook-id"] == first.headers["webhook-id"]

    rotated = c.post(f"/api/v1/webhooks/{hook['id']}/rotate-secret")
    assert rotated.status_code == 200 and rotated.json()["secret"] != hook["secret"], rotated.text
    c.post(f"/api/v1/webhooks/{hook['id']}/test")
    third = receiver.wait_for(lambda ds: len(ds) == 3)[2]
    assert len(third.headers["webhook-signature"].split(" ")) == 2  # signed by both for a day
    check(third, rotated.json()["secret"])
    check(third, hook["secret"])
    err(c.post(f"/api/v1/webhooks/{hook['id']}/deliveries/00000000-0000-4000-8000-000000000000/resend"),
        404, "not_found")

    r = c.patch(f"/api/v1/webhooks/{hook['id']}", json={"enabled": False, "events": ["item.ready"],
                                                         "description": "paused"})
    assert (r.json()["enabled"], r.json()["events"], r.json()["disabled_reason"]) == \
        (False, ["item.ready"], "disabled by you")
    assert "enable it first" in err(c.post(f"/api/v1/webhooks/{hook['id']}/test"), 409,
                                    "endpoint_disabled")["message"]
    err(c.post(f"/api/v1/webhooks/{hook['id']}/deliveries/{attempt['id']}/resend"), 409, "endpoint_disabled")
    err(c.patch(f"/api/v1/webhooks/{hook['id']}", json={"secret": "whsec_AAAA"}), 400, "invalid_body")
    assert c.delete(f"/api/v1/webhooks/{hook['id']}").json() == {"id": hook["id"], "deleted": True}
    err(c.get(f"/api/v1/webhooks/{hook['id']}/deliveries"), 404, "not_found")


def test_redirects_are_not_followed(api, user: User, receiver: WebhookReceiver) -> None:
    c = api(user.token(write=True))
    hook = add_hook(c, receiver.url, ["item.ready"])
    receiver.statuses = [302]
    c.post(f"/api/v1/webhooks/{hook['id']}/test")
    (attempt,) = deliveries(c, hook["id"], lambda ds: len(ds) == 1)
    assert attempt["status_code"] == 302 and attempt["status"] == "retrying"
    assert attempt["error"] == "redirects are not followed (HTTP 302 to /elsewhere)"


def test_the_last_attempt_fails_the_delivery_and_three_days_disable_the_endpoint(
        api, user: User, receiver: WebhookReceiver, admin: Admin) -> None:
    c = api(user.token(write=True))
    hook = add_hook(c, receiver.url, ["item.ready"])
    receiver.statuses = [503] * 10
    c.post(f"/api/v1/webhooks/{hook['id']}/test")
    deliveries(c, hook["id"], lambda ds: len(ds) == 1)
    # the schedule's last attempt, due now, from an endpoint failing for four days
    admin.sql("UPDATE webhook_deliveries SET attempts = 6, next_attempt_at = now() WHERE webhook_id = :w",
              w=hook["id"])
    admin.sql("UPDATE webhooks SET failing_since = now() - interval '4 days' WHERE id = :w", w=hook["id"])
    listed = deliveries(c, hook["id"], lambda ds: len(ds) == 2, timeout=60)  # the sweep finds it
    assert (listed[0]["attempt"], listed[0]["status"], listed[0]["next_attempt_at"]) == (7, "failed", None)
    state = c.get(f"/api/v1/webhooks/{hook['id']}").json()
    assert state["enabled"] is False and "3 days" in state["disabled_reason"], state
    assert c.patch(f"/api/v1/webhooks/{hook['id']}", json={"enabled": True}).json()["failing_since"] is None


def test_a_feed_that_turns_failing_is_told(api, user: User, receiver: WebhookReceiver) -> None:
    c = api(user.token(write=True))
    hook = add_hook(c, receiver.url, ["feed.failing"])
    feeds = FeedSite()
    try:
        url = feeds.add("dying", "rss", [])
        feed = c.post("/api/v1/feeds", json={"url": url}).json()
        feeds.feeds["dying"].status = 404
        for _ in range(4):
            c.post(f"/api/v1/feeds/{feed['id']}/refresh")
            time.sleep(1.5)
        (told,) = receiver.wait_for(lambda ds: len(ds) >= 1)
        body = check(told, hook["secret"])
        assert body["data"]["feed_id"] == feed["id"] and body["data"]["failures"] == 3
        assert body["data"]["last_error"] == "page not found (HTTP 404)"
        time.sleep(2)
        assert len(receiver.deliveries) == 1  # told once, when it turns failing
        feeds.publish("dying", FeedEntry(1))
    finally:
        feeds.close()


def test_the_event_names_are_the_spec_s() -> None:
    spec = load_spec()
    assert list(EVENT_TYPES) == ALL == spec["components"]["schemas"]["WebhookEventType"]["enum"]
    assert set(spec["webhooks"]) == {*ALL, "webhook.test"}


def test_scope_and_bad_input(api, user: User) -> None:
    owner = api(user.token(write=True))
    hook = add_hook(owner, "http://127.0.0.1:9/hook", ["item.ready"])
    scoped = api(user.token(write=True, folders=[user.folder("Scoped")]))
    err(scoped.get("/api/v1/webhooks"), 403, "forbidden_scope")
    err(scoped.get(f"/api/v1/webhooks/{hook['id']}/deliveries"), 403, "forbidden_scope")
    err(scoped.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/", "events": ["item.ready"]}),
        403, "forbidden_scope")
    reader = api(user.token())
    assert reader.get(f"/api/v1/webhooks/{hook['id']}").status_code == 200
    err(reader.post(f"/api/v1/webhooks/{hook['id']}/rotate-secret"), 403, "capability_denied")
    stranger = api(new_user(user.admin).token(write=True))
    err(stranger.get(f"/api/v1/webhooks/{hook['id']}"), 404, "not_found")
    err(stranger.delete(f"/api/v1/webhooks/{hook['id']}"), 404, "not_found")

    body = err(owner.post("/api/v1/webhooks", json={"url": "ftp://example.com/x", "events": ["item.ready"]}),
               400, "invalid_body")
    assert "http or https" in body["message"]
    body = err(owner.post("/api/v1/webhooks", json={"url": "http://no-such-host.invalid/x",
                                                    "events": ["item.ready"]}), 400, "address_refused")
    assert "refused" in body["message"] and "resolve" in body["message"]
    body = err(owner.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/", "events": ["item.exploded"]}),
               400, "invalid_body")
    assert "events" in body["message"].lower() and all(e in body["message"] for e in ALL), body  # never the value
    err(owner.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/", "events": []}), 400, "invalid_body")
    err(owner.get("/api/v1/webhooks/not-a-uuid"), 400, "invalid_id")


def test_each_items_events_arrive_in_causal_order(api, user: User, receiver: WebhookReceiver) -> None:
    """Issue 51: `item.ready` reached the receiver before `item.created` for 2 of 3 notes (both recorded in one
    transaction, due at the same instant, sent in parallel), and `item.created` said `ready`. Now every item's
    created arrives first and says processing (the note was indexed after its item was made)."""
    c = api(user.token(write=True, kb_only=False))
    add_hook(c, receiver.url, ["item.created", "item.ready"])
    ids = []
    for n in range(6):
        r = c.post("/api/v1/ingest", json={"kind": "text", "text": f"Causal note {n} about kingfishers diving."})
        assert r.status_code == 200 and r.json()["status"] == "ready", r.text
        ids.append(r.json()["user_item_id"])
    got = receiver.wait_for(of_type("item.ready", 6))
    order: dict[str, list[tuple[str, str]]] = {}
    for d in got:
        body = json.loads(d.body)
        order.setdefault(body["data"]["item_id"], []).append((body["type"], body["data"]["status"]))
    for item_id in ids:
        assert order[item_id] == [("item.created", "processing"), ("item.ready", "ready")], order[item_id]
