"""A poll survives kill -9 of its worker: after a new worker starts, every promised entry is an item exactly once.
A poll that stored an item but died before marking its entry adds nothing twice. On the same private Lev, with
private addresses refused (only 127.0.0.1 allowlisted) and small caps: a feed on a refused address is not
followed, a check adds at most LEV_FEED_MAX_ENTRIES, and LEV_FEED_MAX_PER_USER answers 409 limit_reached."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fixtures_feeds import FeedEntry, FeedSite
from tests.fixtures_worker import SplitStack


@pytest.fixture(scope="module")
def stack() -> Iterator[SplitStack]:
    s = SplitStack({"LEV_ALLOW_PRIVATE_URLS": "false", "LEV_PRIVATE_URL_ALLOWLIST": '["127.0.0.1/32"]',
                    "LEV_FEED_MAX_ENTRIES": "3", "LEV_FEED_MAX_PER_USER": "40", "LEV_OPML_DEADLINE_SEC": "12"})
    s.start_worker()
    yield s
    s.close()


@pytest.fixture(scope="module")
def site() -> Iterator[FeedSite]:
    s = FeedSite()
    yield s
    s.close()


def client(stack: SplitStack, email: str) -> httpx.Client:
    return httpx.Client(base_url=stack.server.url, headers={"Authorization": f"Bearer {stack.token(email)}"},
                        timeout=120)


def wait_feed(c: httpx.Client, feed_id: str, pred: Any, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        feed = c.get(f"/api/v1/feeds/{feed_id}").json()
        if pred(feed):
            return feed
        assert time.monotonic() < deadline, feed
        time.sleep(0.5)


def urls(c: httpx.Client) -> list[str]:
    return sorted(i["url"] for i in c.get("/api/v1/items", params={"per_page": 100}).json()["items"])


def test_kill_9_mid_poll_loses_nothing_and_adds_nothing_twice(stack: SplitStack, site: FeedSite) -> None:
    c = client(stack, "crash@example.com")
    url = site.add("slow", "rss", [FeedEntry(n, slow=3.0) for n in (13, 12, 11)])
    feed = c.post("/api/v1/feeds", json={"url": url}).json()
    deadline = time.monotonic() + 120
    while "/a/12?slow=3.0" not in site.arrived:  # the first entry is stored, the second is being fetched
        assert time.monotonic() < deadline, site.arrived
        time.sleep(0.2)
    stack.kill_worker()
    assert c.get(f"/api/v1/feeds/{feed['id']}").json()["entries_ingested"] == 1
    stack.start_worker()
    feed = wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 3)
    assert urls(c) == [f"{site.url}/a/{n}?slow=3.0" for n in (11, 12, 13)]
    assert stack.sql("SELECT status, count(*) FROM feed_entries WHERE feed_id = %(f)s GROUP BY status",
                     f=feed["id"]) == [("done", 3)]

    # a poll that stored an item and died before marking its entry: the next one only finds the item
    stack.sql("UPDATE feed_entries SET status = 'pending', item_id = NULL WHERE feed_id = %(f)s AND url LIKE "
              "'%%/a/13%%'", f=feed["id"])
    stack.sql("UPDATE feeds SET entries_ingested = entries_ingested - 1 WHERE id = %(f)s", f=feed["id"])
    c.post(f"/api/v1/feeds/{feed['id']}/refresh")
    wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 3)
    assert stack.sql("SELECT count(*) FROM feed_entries WHERE feed_id = %(f)s AND status = 'pending'",
                     f=feed["id"]) == [(0,)]
    assert len(urls(c)) == 3


def test_refused_addresses_caps_and_the_limit(stack: SplitStack, site: FeedSite) -> None:
    c = client(stack, "caps@example.com")
    port = site.url.rsplit(":", 1)[1]
    r = c.post("/api/v1/feeds", json={"url": f"http://127.0.0.2:{port}/feeds/x"})
    assert r.status_code == 400 and r.json()["error"] == "address_refused", r.text
    assert "non-public address (127.0.0.2)" in r.json()["message"]
    r = c.post("/api/v1/webhooks", json={"url": f"http://127.0.0.2:{port}/hook", "events": ["item.ready"]})
    assert r.status_code == 400 and r.json()["error"] == "address_refused", r.text
    assert "refused" in r.json()["message"] and "127.0.0.2" in r.json()["message"]
    for message in (r.json()["message"], c.post("/api/v1/feeds", json={"url": f"http://[::1]:{port}/f"}).json()[
            "message"]):  # a first-hour user is told how to allow it
        assert "LEV_PRIVATE_URL_ALLOWLIST" in message and "LEV_ALLOW_PRIVATE_URLS" in message, message
    r = c.post("/api/v1/webhooks", json={"url": "http://169.254.169.254/latest", "events": ["item.ready"]})
    assert r.status_code == 400 and r.json()["error"] == "address_refused", r.text
    assert "no setting allows it" in r.json()["message"], r.text

    url = site.add("many", "rss", [FeedEntry(n) for n in range(108, 100, -1)])  # 8 entries
    feed = c.post("/api/v1/feeds", json={"url": url}).json()
    wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 3)  # the newest three
    assert urls(c) == [f"{site.url}/a/{n}" for n in (106, 107, 108)]
    site.publish("many", *[FeedEntry(n) for n in range(115, 110, -1)])  # five new ones
    c.post(f"/api/v1/feeds/{feed['id']}/refresh")
    wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 6)
    time.sleep(3)
    assert urls(c)[3:] == [f"{site.url}/a/{n}" for n in (113, 114, 115)]  # at most three a check

    for n in range(39):
        assert c.post("/api/v1/feeds", json={"url": site.add(f"cap{n}", "atom", [])}).status_code == 201
    r = c.post("/api/v1/feeds", json={"url": site.add("cap-over", "atom", [])})
    assert r.status_code == 409, r.text
    assert (r.json()["error"], r.json()["cap"], r.json()["used"]) == ("limit_reached", 40, 40)
    assert "unfollow one" in r.json()["message"]
    assert len(c.get("/api/v1/feeds").json()["feeds"]) == 40


def test_a_feed_of_7000_entries_answers_at_once_and_its_entries_follow(stack: SplitStack, site: FeedSite) -> None:
    """Issue 47 item 7: following a 20,000-entry feed held the request 90 s (read whole and recorded in it), past a
    proxy's 60 s, and a 10,000-entry one hit the client's timeout on a busy machine. Now a feed over 64 KB is
    only glanced at in the request: the answer comes within 15 s, the feed `reading`, and its entries are read in
    the background, the feed showing how far it got. Issue 38 item 1: more
    entries than PostgreSQL's 65,535 bind parameters allow in one statement (about 6,554 rows) were taken for a
    database outage; they are written in batches: at most LEV_FEED_MAX_ENTRIES (3 here) pending, the rest seen."""
    c = client(stack, "huge@example.com")
    url = site.add("huge", "rss", [FeedEntry(n) for n in range(40_000, 33_000, -1)])  # 7,000 entries, 1 MB
    started = time.monotonic()
    r = c.post("/api/v1/feeds", json={"url": url})
    took = time.monotonic() - started
    assert r.status_code == 201, r.text
    assert took < 45, took  # 15 s on a quiet machine; under a proxy's 60 s whatever the load (it was 90 s)
    answered = r.json()
    assert (answered["reading"], answered["entries_found"], answered["entries_pending"]) == (True, 0, 0), answered
    assert (answered["title"], answered["status"], answered["last_checked_at"]) == ("Feed huge", "active", None)
    feed = wait_feed(c, answered["id"], lambda f: f["entries_ingested"] == 3 and f["entries_pending"] == 0)
    assert (feed["reading"], feed["entries_found"], feed["status"], feed["last_error"]) == (False, 7_000, "active",
                                                                                            None), feed
    counts = dict(stack.sql("SELECT status, count(*) FROM feed_entries WHERE feed_id = %(f)s GROUP BY status",
                            f=feed["id"]))
    assert counts == {"done": 3, "skipped": 6_997}, counts
    assert urls(c) == [f"{site.url}/a/{n}" for n in (39_998, 39_999, 40_000)]  # the newest three

    site.publish("huge", *[FeedEntry(n) for n in range(41_000, 40_000, -1)])  # 1,000 new: 8,000 in the feed
    checked = feed["last_checked_at"]
    c.post(f"/api/v1/feeds/{feed['id']}/refresh")
    feed = wait_feed(c, feed["id"], lambda f: f["last_checked_at"] != checked and f["entries_ingested"] == 6)
    assert (feed["status"], feed["last_error"], feed["failures"], feed["entries_found"]) == ("active", None, 0,
                                                                                              8_000), feed
    counts = dict(stack.sql("SELECT status, count(*) FROM feed_entries WHERE feed_id = %(f)s GROUP BY status",
                            f=feed["id"]))
    assert counts == {"done": 6, "skipped": 7_994}, counts
    assert urls(c)[3:] == [f"{site.url}/a/{n}" for n in (40_998, 40_999, 41_000)]  # the newest of the new


def test_a_statement_that_fails_fails_the_check_and_the_feed_becomes_failing(stack: SplitStack,
                                                                              site: FeedSite) -> None:
    """A refused statement (here a constraint the test adds) is not an outage: the check fails with the reason in
    last_error, the feed is failing after three, and it recovers once the statement goes through."""
    c = client(stack, "poison@example.com")
    url = site.add("poison", "atom", [])
    feed = c.post("/api/v1/feeds", json={"url": url}).json()
    stack.sql("ALTER TABLE feed_entries ADD CONSTRAINT lev_test_poison CHECK (url NOT LIKE '%%/a/4242') NOT VALID")
    try:
        site.publish("poison", FeedEntry(4242))
        # each refresh checks it again (the schedule may check it too, as it is due: failures can go up by two),
        # until it has failed three times in a row
        while feed["failures"] < 3:
            c.post(f"/api/v1/feeds/{feed['id']}/refresh")
            feed = wait_feed(c, feed["id"], lambda f, n=feed["failures"]: f["failures"] > n)
        assert feed["status"] == "failing"
        assert "could not be recorded (IntegrityError)" in feed["last_error"], feed
    finally:
        stack.sql("ALTER TABLE feed_entries DROP CONSTRAINT lev_test_poison")
    c.post(f"/api/v1/feeds/{feed['id']}/refresh")
    feed = wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 1)
    assert (feed["status"], feed["last_error"], feed["failures"]) == ("active", None, 0)


def _opml(site: FeedSite, names: list[str]) -> bytes:
    outlines = "".join(f'<outline text="{n}" xmlUrl="{site.url}/drip/25/{n}"/>' for n in names)
    return f'<?xml version="1.0"?><opml version="2.0"><body>{outlines}</body></opml>'.encode()


def test_one_users_slow_imports_take_their_share_and_end_by_the_deadline(stack: SplitStack, site: FeedSite) -> None:
    """Issue 38 item 4: while one user imported two OPML files of slow-dripping feeds, another user's follow of a
    healthy feed failed after 15 s (every feed fetch of the process shared one pool of 10 connections), and an
    import had no overall deadline. Now one user's fetches hold at most their share, and an import answers by
    LEV_OPML_DEADLINE_SEC (12 s here) with the feeds it did not reach refused as not checked."""
    slow = client(stack, "slow@example.com")
    names = [f"drip{n}" for n in range(24)]
    for n in names:
        site.add(n, "rss", [FeedEntry(1)])
    answers: list[httpx.Response] = []

    def run(part: list[str]) -> None:
        answers.append(slow.post("/api/v1/feeds/opml", files={"file": ("subs.opml", _opml(site, part))}))

    imports = [threading.Thread(target=run, args=(names[:12],)), threading.Thread(target=run, args=(names[12:],))]
    for t in imports:
        t.start()
    deadline = time.monotonic() + 60
    while sum(1 for p in list(site.arrived) if p.startswith("/drip/")) < 4:  # the slow user holds its share
        assert time.monotonic() < deadline, site.arrived
        time.sleep(0.1)
    other = client(stack, "healthy@example.com")
    r = other.post("/api/v1/feeds", json={"url": site.add("healthy", "rss", [FeedEntry(5)])})
    assert r.status_code == 201, r.text
    assert len(answers) == 0  # answered while the slow imports still ran
    for t in imports:
        t.join(120)
    assert len(answers) == 2
    for a in answers:
        assert a.status_code == 200, a.text
        body = a.json()
        assert body["added"] + body["refused"] == 12, body
        late = [r for r in body["refusals"] if "not checked: the import's 12 s" in r["error"]]
        assert late and body["added"] < 12, body
    # the slow user's share was all it ever fetched at once (16 before); a fetch that just ended and the one
    # taking its place may overlap by a moment on a busy machine
    assert site.most_dripping <= 5, site.most_dripping
