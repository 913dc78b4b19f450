"""The folder page's feeds block in real Chromium under a strict CSP: follow a site (its feed is found), entries
arriving as items, the last check and the count, pause and resume, "Refresh now", a refusal in words, a failing
feed's error, OPML import, unfollow. With LEV_SCREENSHOTS=DIR the block is saved there."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from lev.feeds.poll import poll_job_id
from tests.fixtures_browser import StrictPage, browser, needs_chromium, sign_up  # noqa: F401 (fixture)
from tests.fixtures_feeds import FeedEntry, FeedSite
from tests.stack import Admin

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def site() -> Iterator[FeedSite]:
    s = FeedSite()
    yield s
    s.close()


@pytest.fixture
def strict(browser: Any, server) -> Iterator[StrictPage]:  # type: ignore[no-untyped-def]  # noqa: F811
    p = StrictPage(browser, server.url)
    yield p
    p.close()


def row_text(page: Any) -> str:
    return str(page.locator("#feeds tbody tr").first.inner_text())


def polls_idle(admin: Admin, url: str) -> bool:
    """No poll of the feed queued or running, and none due."""
    feed_id, due = admin.sql("SELECT id, next_poll_at <= now() FROM feeds WHERE url = :u", u=url)[0]
    job = poll_job_id(feed_id)
    with redis.Redis.from_url(str(admin.redis_url)) as r:
        busy = r.exists(f"arq:job:{job}", f"arq:in-progress:{job}")
    return not due and not busy


def reload_until(page: Any, pred: Any, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, page.inner_text("#feeds")
        time.sleep(1)
        page.reload()


def test_following_a_feed_from_the_folder_page(strict: StrictPage, site: FeedSite, admin: Admin,
                                               tmp_path: Path) -> None:
    page = strict.page
    sign_up(page)
    page.get_by_label("New folder").fill("Reading")
    page.get_by_role("button", name="Create", exact=True).click()
    page.wait_for_url("**/folders/*")
    assert "This folder follows no feed yet." in page.inner_text("#feeds")

    site.add("blog", "atom", [FeedEntry(1002), FeedEntry(1001)], title="A tidy blog")
    page.get_by_label("Follow a feed").fill(f"{site.url}/site/blog")
    page.get_by_role("button", name="Follow", exact=True).click()
    page.locator("#feeds tbody tr").wait_for()
    assert "A tidy blog" in row_text(page) and "active" in row_text(page)
    reload_until(page, lambda: row_text(page).split("\t")[3].strip() == "2")
    assert page.locator("#items").inner_text().count("Notes on ") == 2
    if os.environ.get("LEV_SCREENSHOTS"):
        page.locator("#feeds").screenshot(path=str(Path(os.environ["LEV_SCREENSHOTS"]) / "folder-feeds.png"))

    # the reload's deferred script must have run before the next button is clicked: a click before it does nothing
    with page.expect_navigation(timeout=90_000):
        page.get_by_role("button", name="Pause A tidy blog").click()
    page.get_by_role("button", name="Resume A tidy blog").wait_for()
    assert "paused" in row_text(page)
    with page.expect_navigation(timeout=90_000):  # a reload on a loaded CI machine
        page.get_by_role("button", name="Resume A tidy blog").click()
    def checked() -> Any:
        return admin.sql("SELECT last_checked_at FROM feeds WHERE url = :u", u=f"{site.url}/feeds/blog")[0][0]

    before = checked()
    with page.expect_navigation(timeout=90_000):  # a reload on a loaded CI machine
        page.get_by_role("button", name="Refresh A tidy blog now").click()
    assert "active" in row_text(page)
    # the refresh's check (or the resume's, when the refresh came while it ran) is recorded, and no poll is queued,
    # running or due, before the failures are set by hand below
    deadline = time.monotonic() + 60
    while checked() == before or not polls_idle(admin, f"{site.url}/feeds/blog"):
        assert time.monotonic() < deadline, "the refresh never polled the feed"
        time.sleep(0.2)

    page.get_by_label("Follow a feed").fill(f"{site.url}/plain")
    page.get_by_role("button", name="Follow", exact=True).click()
    alert = page.locator("#follow-form [role=alert]")
    alert.wait_for()
    assert alert.inner_text().startswith("Not a feed: this page is not a feed and names none")

    admin.sql("UPDATE feeds SET failures = 3, last_error = 'the site returned a server error (HTTP 500)' "
              "WHERE url = :u", u=f"{site.url}/feeds/blog")
    page.reload()
    assert "failing" in row_text(page) and "server error (HTTP 500) (3 checks in a row)" in row_text(page)

    site.add("opml-page", "rss", [], title="From OPML")
    opml = tmp_path / "subs.opml"
    opml.write_text(f'<?xml version="1.0"?><opml version="2.0"><body><outline text="From OPML" '
                    f'xmlUrl="{site.url}/feeds/opml-page"/></body></opml>')
    page.get_by_text("OPML: import or export feeds").click()
    page.set_input_files("#opml-file", str(opml))
    page.get_by_role("button", name="Import", exact=True).click()
    status = page.locator("#opml-form [role=status]")
    page.locator("#opml-form [role=status]:not([hidden]), #opml-form [role=alert]:not([hidden])").wait_for()
    assert status.is_visible(), page.locator("#opml-form [role=alert]").inner_text()
    assert status.inner_text() == "Followed 1 feed; 0 already followed; 0 refused."

    page.get_by_role("button", name="Unfollow A tidy blog").click()
    page.get_by_text("This folder follows no feed yet.").wait_for()
    assert page.locator("#items").inner_text().count("Notes on ") == 2  # its items stay
    assert strict.violations == []
