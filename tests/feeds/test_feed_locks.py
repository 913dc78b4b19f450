"""A poll and an unfollow of the same feed at once: the poll's writes lock the feed's row before its entries, in the
unfollow's order, so neither is aborted as a deadlock (an unfollow answered 503 so once); a check recorded after the
feed was unfollowed records nothing (it raised before); a poll under way brings no more items once its feed is
unfollowed."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from lev.feeds.poll import record_check
from lev.store import feeds as feed_store
from lev.store.db import database
from tests.fixtures_feeds import FeedEntry, FeedSite
from tests.stack import Admin, Api, User, new_user


@pytest.fixture(scope="module")
def site() -> Iterator[FeedSite]:
    s = FeedSite()
    yield s
    s.close()


def paused_feed_with_entry(admin: Admin, user: User) -> tuple[uuid.UUID, dict[str, object]]:
    feed_id, entry_id = uuid.uuid4(), uuid.uuid4()
    admin.sql("INSERT INTO feeds (id, user_id, url, paused) VALUES (:f, :u, :url, true)", f=feed_id, u=user.id,
              url=f"http://127.0.0.1:9/{feed_id}.xml")
    admin.sql("INSERT INTO feed_entries (id, user_id, feed_id, guid_key, url) VALUES (:e, :u, :f, :g, :url)",
              e=entry_id, u=user.id, f=feed_id, g=entry_id.bytes, url=f"http://127.0.0.1:9/{entry_id}")
    return feed_id, {"id": entry_id, "feed_id": feed_id}


def test_finishing_an_entry_while_the_feed_is_unfollowed_never_deadlocks(admin: Admin, user: User) -> None:
    feed_id, entry = paused_feed_with_entry(admin, user)

    async def finish() -> None:
        async with database().transaction() as s:
            await feed_store.finish_entry(s, entry, status="done", item_id=None, error=None, brought=True,
                                          folder_id=None)

    async def unfollow_meanwhile() -> None:
        async with database().transaction() as s:
            await s.execute(text("SELECT id FROM feeds WHERE id = :f FOR UPDATE"), {"f": feed_id})  # as unfollow
            poll = asyncio.create_task(finish())
            await asyncio.sleep(2)
            assert not poll.done()  # it waits for the feed's row
            await feed_store.delete_feed(s, feed_id)  # its entries go with it
        await poll  # no deadlock was detected on either side

    admin.run_coro(unfollow_meanwhile())
    assert admin.sql("SELECT count(*) FROM feed_entries WHERE id = :e", e=entry["id"]) == [(0,)]
    assert admin.sql("SELECT count(*) FROM feeds WHERE id = :f", f=feed_id) == [(0,)]


def test_a_check_recorded_after_the_unfollow_records_nothing(admin: Admin, user: User) -> None:
    feed_id, _ = paused_feed_with_entry(admin, user)
    admin.sql("DELETE FROM feeds WHERE id = :f", f=feed_id)
    deps = admin.job_ctx()["deps"]
    feed = {"id": feed_id, "user_id": user.id, "failures": 2, "url": "x", "title": None, "feed_title": None,
            "folder_id": None}
    assert admin.run_coro(record_check(deps, feed, None, {}, "the site returned a server error (HTTP 500)")) == 0


def test_a_poll_under_way_brings_nothing_more_once_unfollowed(server, api, admin: Admin, site: FeedSite) -> None:  # type: ignore[no-untyped-def]
    c: Api = api(new_user(admin).token(write=True))
    url = site.add("unfollowed", "rss", [FeedEntry(n, slow=1.5) for n in range(906, 900, -1)])  # six, 1.5 s each
    feed = c.post("/api/v1/feeds", json={"url": url}).json()
    deadline = time.monotonic() + 120
    while not any("/a/902" in a for a in site.arrived):  # the second entry is being fetched
        assert time.monotonic() < deadline, site.arrived
        time.sleep(0.1)
    assert c.delete(f"/api/v1/feeds/{feed['id']}").status_code == 200
    time.sleep(7)  # the rest of the six would have arrived by now (all of them, before the fix)
    fetched = [a for a in site.arrived if "/a/90" in a]
    assert len(fetched) <= 3, fetched  # the one under way (and one about to be) at most, never the rest
    titles = [i["url"] for i in c.get("/api/v1/items", params={"per_page": 100}).json()["items"]]
    assert 1 <= len(titles) <= 3, titles  # the items it brought stay
