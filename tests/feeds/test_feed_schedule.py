"""The schedule's batched checks (issue 40 item 1): due feeds are taken by one statement and checked together; a
304 and a 200 with the same body as last time are recorded as successful checks without reading the document (a
title changed by hand stays), a changed feed's new entries are recorded and its poll queued (they arrive as items),
and a failed check counts a failure."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from lev.feeds.poll import lock_key
from tests.fixtures_feeds import FeedEntry, FeedSite
from tests.stack import Admin, User


@pytest.fixture(scope="module")
def site() -> Iterator[FeedSite]:
    s = FeedSite()
    yield s
    s.close()


def feed_row(admin: Admin, feed_id: str) -> Any:
    return admin.sql("SELECT feed_title, failures, last_error, last_checked_at, next_poll_at - now() > interval "
                     "'20 minutes', body_sha256 IS NOT NULL FROM feeds WHERE id = :f", f=feed_id)[0]


def test_due_feeds_are_checked_in_a_batch(api, user: User, admin: Admin, site: FeedSite) -> None:
    c = api(user.token(write=True))
    tagged = c.post("/api/v1/feeds", json={"url": site.add("tagged", "rss", [FeedEntry(1)])}).json()
    bare_url = site.add("bare", "atom", [FeedEntry(2)])
    site.feeds["bare"].validators = False
    bare = c.post("/api/v1/feeds", json={"url": bare_url}).json()
    fresh = c.post("/api/v1/feeds", json={"url": site.add("fresh", "json", [FeedEntry(3)])}).json()
    gone = c.post("/api/v1/feeds", json={"url": site.add("gone", "rss", [])}).json()
    ids = [f["id"] for f in (tagged, bare, fresh, gone)]
    deadline = time.monotonic() + 120
    while len(c.get("/api/v1/items", params={"per_page": 100}).json()["items"]) < 3:  # the follows' entries
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert all(feed_row(admin, f)[5] for f in ids)  # each follow kept its body's hash

    admin.sql("UPDATE feeds SET feed_title = 'Renamed by hand' WHERE id = ANY(CAST(:ids AS uuid[]))", ids=ids[:2])
    site.publish("fresh", FeedEntry(30))
    site.feeds["gone"].status = 404
    before = {f: feed_row(admin, f)[3] for f in ids}
    admin.sql("UPDATE feeds SET next_poll_at = now() WHERE id = ANY(CAST(:ids AS uuid[]))", ids=ids)
    hits = len(site.hits)
    deadline = time.monotonic() + 180
    while True:  # the schedule's next tick (every minute) checks them
        rows = {f: feed_row(admin, f) for f in ids}
        if all(rows[f][3] > before[f] for f in ids):
            break
        assert time.monotonic() < deadline, rows
        time.sleep(0.5)
    assert all(rows[f][3] > before[f] and rows[f][4] for f in ids), rows  # checked, next check in ~30 min
    answered = [status for path, status, _ in site.hits[hits:]]
    assert answered.count(304) >= 1 and answered.count(200) >= 2 and answered.count(404) >= 1, answered
    assert rows[ids[0]][:3] == ("Renamed by hand", 0, None)  # 304: nothing read
    assert rows[ids[1]][:3] == ("Renamed by hand", 0, None)  # the same body again: nothing read
    assert rows[ids[3]][1:3] == (1, "page not found (HTTP 404)")
    deadline = time.monotonic() + 120
    while not any(i["url"] == site.link(FeedEntry(30)) for i in
                  c.get("/api/v1/items", params={"per_page": 100}).json()["items"]):
        assert time.monotonic() < deadline, "the changed feed's new entry did not arrive"
        time.sleep(0.3)
    assert c.get(f"/api/v1/feeds/{fresh['id']}").json()["entries_ingested"] == 2


def test_a_feed_its_poll_holds_when_the_schedule_takes_it_stays_due(api, user: User, admin: Admin,
                                                                    site: FeedSite) -> None:
    """The schedule takes a due feed with a ten-minute lease. When the feed's poll job held it (a refresh had just
    queued one), the schedule left it, and a poll that had read the lease checked nothing: the feed went unchecked
    for ten minutes, the refresh lost. The schedule now gives the lease back, and the next tick checks the feed."""
    c = api(user.token(write=True))
    feed = c.post("/api/v1/feeds", json={"url": site.add("held", "rss", [FeedEntry(7)])}).json()
    deadline = time.monotonic() + 120
    while feed_row(admin, feed["id"])[3] is None:  # the follow's own check
        assert time.monotonic() < deadline
        time.sleep(0.3)
    site.publish("held", FeedEntry(8))  # something new: the schedule's check needs the feed's lock to record it
    checked = feed_row(admin, feed["id"])[3]
    with psycopg.connect(admin.database_url.replace("postgresql+psycopg://", "postgresql://"),
                         autocommit=True) as poll_job:
        poll_job.execute("SELECT pg_advisory_lock(%s)", (lock_key(uuid.UUID(feed["id"])),))
        due = admin.sql("UPDATE feeds SET next_poll_at = now() WHERE id = :f RETURNING next_poll_at",
                        f=feed["id"])[0][0]
        deadline = time.monotonic() + 150
        while True:  # the schedule's next tick takes it, fails to lock it, and gives its lease back
            at, now = admin.sql("SELECT next_poll_at, now() FROM feeds WHERE id = :f", f=feed["id"])[0]
            if at != due and at <= now:
                break
            assert time.monotonic() < deadline, (at, now)  # before: leased for ten minutes, checked by nobody
            time.sleep(0.5)
        assert feed_row(admin, feed["id"])[3] == checked  # nothing was recorded while the lock was held
    deadline = time.monotonic() + 150
    while feed_row(admin, feed["id"])[3] == checked:  # the tick after checks it
        assert time.monotonic() < deadline
        time.sleep(0.5)
