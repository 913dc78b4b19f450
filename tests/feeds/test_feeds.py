"""Following feeds over REST against a loopback feed site: a site's page names its feed, RSS 0.91/2.0, Atom and
JSON Feed entries become items in the folder, conditional GET, nothing twice (by guid and by canonical URL), a
first follow takes the newest entries, podcast audio is transcribed, pause/resume/unfollow, a failing feed, OPML
in and out, scope rules, and bad input answered in words with nothing followed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fixtures_feeds import FeedEntry, FeedSite
from tests.stack import User, new_user


@pytest.fixture(scope="module")
def site() -> Iterator[FeedSite]:
    s = FeedSite()
    yield s
    s.close()


def err(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["error"] == code and body.get("message"), body
    return body


def wait_feed(c: httpx.Client, feed_id: str, pred: Any, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        feed = c.get(f"/api/v1/feeds/{feed_id}").json()
        if pred(feed):
            return feed
        assert time.monotonic() < deadline, feed
        time.sleep(0.3)


def items(c: httpx.Client, folder_id: str | None = None) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"per_page": 100}
    if folder_id:
        params["folder_id"] = folder_id
    return list(c.get("/api/v1/items", params=params).json()["items"])


def test_a_site_page_names_its_feed_and_new_entries_arrive_once(api, user: User, site: FeedSite) -> None:
    c = api(user.token(write=True, kb_only=False))
    folder = user.folder("News")
    site.add("news", "rss", [FeedEntry(n, guid=f"news-{n}") for n in (103, 102, 101)], title="Daily News")
    r = c.post("/api/v1/feeds", json={"url": f"{site.url}/site/news", "folder_id": folder})
    assert r.status_code == 201, r.text
    feed = r.json()
    assert feed["url"] == f"{site.url}/feeds/news" and feed["title"] == "Daily News"
    assert (feed["folder_id"], feed["status"], feed["last_error"]) == (folder, "active", None)
    assert feed["last_checked_at"] is not None
    feed = wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 3)
    found = items(c, folder)
    assert sorted(i["url"] for i in found) == [f"{site.url}/a/{n}" for n in (101, 102, 103)]
    assert all(i["status"] == "ready" and i["folder_ids"] == [folder] for i in found)
    assert all(i["title"].startswith("Notes on ") for i in found)
    assert found[0]["url"] == f"{site.url}/a/103"  # the newest entry is the newest item

    # following it again (by either URL) answers the same feed, unchanged
    again = c.post("/api/v1/feeds", json={"url": f"{site.url}/feeds/news"})
    assert again.status_code == 200 and again.json()["id"] == feed["id"], again.text
    assert [f["id"] for f in c.get("/api/v1/feeds").json()["feeds"]] == [feed["id"]]

    # nothing new: the refresh sends the ETag and gets a 304
    before = site.count("/feeds/news", 304)
    assert c.post(f"/api/v1/feeds/{feed['id']}/refresh").status_code == 202
    wait_feed(c, feed["id"], lambda f: site.count("/feeds/news", 304) > before)
    assert any(h[2] == '"v0"' for h in site.hits if h[0] == "/feeds/news")

    # a new entry, one re-published under a new guid (same link) and one with a known guid but a new link
    site.publish("news", FeedEntry(104, guid="news-104"), FeedEntry(101, guid="news-101-again"),
                 FeedEntry(105, guid="news-102"))
    r = c.post(f"/api/v1/feeds/{feed['id']}/refresh")
    assert r.status_code == 202 and r.json()["id"] == feed["id"], r.text
    feed = wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 4)
    time.sleep(2)
    urls = sorted(i["url"] for i in items(c, folder))
    assert urls == [f"{site.url}/a/{n}" for n in (101, 102, 103, 104)], urls
    assert c.get(f"/api/v1/feeds/{feed['id']}").json()["entries_ingested"] == 4


@pytest.mark.parametrize("fmt", ["atom", "json", "rss091"])
def test_atom_json_feed_and_rss_091_are_followed(api, user: User, site: FeedSite, fmt: str) -> None:
    c = api(user.token(write=True))
    base = {"atom": 200, "json": 300, "rss091": 400}[fmt]
    url = site.add(f"f-{fmt}", fmt, [FeedEntry(base + 2), FeedEntry(base + 1)], title=f"The {fmt} feed")
    r = c.post("/api/v1/feeds", json={"url": url, "title": f"My {fmt}"})
    assert r.status_code == 201, r.text
    assert r.json()["title"] == f"My {fmt}" and r.json()["folder_id"] is None
    wait_feed(c, r.json()["id"], lambda f: f["entries_ingested"] == 2)
    assert sorted(i["url"] for i in items(c)) == [f"{site.url}/a/{base + 1}", f"{site.url}/a/{base + 2}"]


def test_a_first_follow_takes_the_newest_entries_not_the_archive(api, user: User, site: FeedSite) -> None:
    c = api(user.token(write=True))
    url = site.add("archive", "rss", [FeedEntry(n) for n in range(530, 500, -1)])  # 30 entries, newest first
    feed = c.post("/api/v1/feeds", json={"url": url}).json()
    wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 20)
    assert sorted(i["url"] for i in items(c)) == sorted(f"{site.url}/a/{n}" for n in range(511, 531))
    c.post(f"/api/v1/feeds/{feed['id']}/refresh")  # the older ten were seen, not promised
    time.sleep(3)
    assert len(items(c)) == 20


def test_a_podcast_episode_is_transcribed_like_any_audio_link(api, user: User, site: FeedSite) -> None:
    c = api(user.token(write=True))
    url = site.add("podcast", "rss", [FeedEntry(601, guid="ep-1", audio=True)], title="A podcast")
    feed = c.post("/api/v1/feeds", json={"url": url}).json()
    wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 1)
    (item,) = items(c)
    assert item["kind"] == "audio" and item["url"] == f"{site.url}/audio/601.wav"
    deadline = time.monotonic() + 120
    while item["transcription_status"] != "done":
        assert time.monotonic() < deadline, item
        time.sleep(0.5)
        item = c.get(f"/api/v1/items/{item['id']}").json()
    assert item["status"] == "ready"


def test_pause_resume_rename_move_and_unfollow(api, user: User, site: FeedSite) -> None:
    c = api(user.token(write=True))
    one, two = user.folder("One"), user.folder("Two")
    url = site.add("manage", "rss", [FeedEntry(701)])
    feed = c.post("/api/v1/feeds", json={"url": url, "folder_id": one}).json()
    wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 1)
    r = c.patch(f"/api/v1/feeds/{feed['id']}", json={"paused": True, "title": "Renamed", "folder_id": two})
    assert r.status_code == 200, r.text
    assert (r.json()["status"], r.json()["title"], r.json()["folder_id"], r.json()["next_check_at"]) == \
        ("paused", "Renamed", two, None)
    assert "resume it" in err(c.post(f"/api/v1/feeds/{feed['id']}/refresh"), 409, "feed_paused")["message"]
    site.publish("manage", FeedEntry(702))
    time.sleep(2)
    assert len(items(c)) == 1  # paused: not checked
    r = c.patch(f"/api/v1/feeds/{feed['id']}", json={"paused": False, "title": None, "folder_id": None})
    assert (r.json()["status"], r.json()["title"], r.json()["folder_id"]) == ("active", "Feed manage", None)
    wait_feed(c, feed["id"], lambda f: f["entries_ingested"] == 2)  # resumed: checked at once, unfiled now
    assert [i["folder_ids"] for i in items(c) if i["url"].endswith("/a/702")] == [[]]
    err(c.patch(f"/api/v1/feeds/{feed['id']}", json={"folder_id": "00000000-0000-4000-8000-000000000000"}),
        404, "folder_not_found")
    r = c.delete(f"/api/v1/feeds/{feed['id']}")
    assert r.json() == {"id": feed["id"], "deleted": True}
    err(c.get(f"/api/v1/feeds/{feed['id']}"), 404, "not_found")
    assert len(items(c)) == 2  # the items it brought stay


def test_a_feed_that_keeps_failing_is_marked_failing_and_checked_less_often(api, user: User,
                                                                            site: FeedSite) -> None:
    c = api(user.token(write=True))
    url = site.add("flaky", "rss", [FeedEntry(801)])
    feed = c.post("/api/v1/feeds", json={"url": url}).json()
    site.feeds["flaky"].status = 500
    for n in (1, 2, 3):
        c.post(f"/api/v1/feeds/{feed['id']}/refresh")
        feed = wait_feed(c, feed["id"], lambda f, n=n: f["failures"] == n)
    assert feed["status"] == "failing"
    assert feed["last_error"] == "the site returned a server error (HTTP 500)"
    wait = (time.mktime(time.strptime(feed["next_check_at"][:19], "%Y-%m-%dT%H:%M:%S"))
            - time.mktime(time.strptime(feed["last_checked_at"][:19], "%Y-%m-%dT%H:%M:%S")))
    assert wait > 30 * 60 * 8 * 0.85, feed  # 30 min doubled three times
    site.feeds["flaky"].status = 200
    c.post(f"/api/v1/feeds/{feed['id']}/refresh")
    feed = wait_feed(c, feed["id"], lambda f: f["failures"] == 0)
    assert (feed["status"], feed["last_error"]) == ("active", None)


def test_not_a_feed_is_refused_in_words_and_nothing_is_followed(api, user: User, site: FeedSite) -> None:
    c = api(user.token(write=True))
    body = err(c.post("/api/v1/feeds", json={"url": f"{site.url}/plain"}), 400, "not_a_feed")
    assert "names none" in body["message"]
    body = err(c.post("/api/v1/feeds", json={"url": f"{site.url}/missing"}), 400, "not_a_feed")
    assert "page not found (HTTP 404)" in body["message"]
    body = err(c.post("/api/v1/feeds", json={"url": f"{site.url}/garbage.xml"}), 400, "not_a_feed")
    assert "not an RSS, Atom or JSON Feed" in body["message"] and "line" in body["message"], body
    body = err(c.post("/api/v1/feeds", json={"url": f"{site.url}/huge.xml"}), 400, "not_a_feed")
    assert "larger than 10 MB" in body["message"]
    err(c.post("/api/v1/feeds", json={"url": "ftp://example.com/feed"}), 400, "invalid_body")
    err(c.post("/api/v1/feeds", json={"url": site.url + "/feeds/x", "folder_id": "nope"}), 400, "invalid_body")
    err(c.post("/api/v1/feeds", json={"url": f"{site.url}/feeds/x", "folder_id":
                                      "00000000-0000-4000-8000-000000000000"}), 404, "folder_not_found")
    err(c.post("/api/v1/feeds", json={"url": f"{site.url}/feeds/x", "unknown": 1}), 400, "invalid_body")
    assert c.get("/api/v1/feeds").json() == {"feeds": []}


def test_scope_rules(api, user: User, site: FeedSite) -> None:
    mine = user.folder("Mine")
    other = user.folder("Other")
    owner = api(user.token(write=True))
    url = site.add("scoped", "rss", [FeedEntry(901)])
    in_scope = owner.post("/api/v1/feeds", json={"url": url, "folder_id": mine}).json()
    out = owner.post("/api/v1/feeds", json={"url": site.add("scoped2", "rss", []), "folder_id": other}).json()
    scoped = api(user.token(write=True, folders=[mine]))
    err(scoped.post("/api/v1/feeds", json={"url": url}), 403, "forbidden_scope")
    err(scoped.patch(f"/api/v1/feeds/{in_scope['id']}", json={"paused": True}), 403, "forbidden_scope")
    err(scoped.post("/api/v1/feeds/opml", files={"file": ("f.opml", b"<opml/>")}), 403, "forbidden_scope")
    assert [f["id"] for f in scoped.get("/api/v1/feeds").json()["feeds"]] == [in_scope["id"]]
    err(scoped.get(f"/api/v1/feeds/{out['id']}"), 404, "not_found")
    assert out["url"] not in scoped.get("/api/v1/feeds/opml").text
    reader = api(user.token())
    err(reader.post("/api/v1/feeds", json={"url": url}), 403, "capability_denied")
    err(reader.delete(f"/api/v1/feeds/{in_scope['id']}"), 403, "capability_denied")
    assert len(reader.get("/api/v1/feeds").json()["feeds"]) == 2
    err(api(None).get("/api/v1/feeds"), 401, "missing_bearer_token")


OPML = b"""<?xml version="1.0" encoding="UTF-8"?>
<opml version="2.0">
  <head><title>My subscriptions</title></head>
  <body>
    <outline text="Science">
      <outline type="rss" text="Science one" xmlUrl="URL/feeds/opml-a"/>
      <outline text="Space">
        <outline type="rss" text="Space one" xmlUrl="URL/feeds/opml-b"/>
      </outline>
    </outline>
    <outline type="rss" text="Loose" xmlUrl="URL/site/opml-c"/>
    <outline type="rss" text="Broken" xmlUrl="URL/plain"/>
    <outline type="rss" text="Again" xmlUrl="URL/feeds/opml-a"/>
  </body>
</opml>
"""


def test_opml_import_and_export(api, user: User, site: FeedSite) -> None:
    c = api(user.token(write=True))
    for name in ("opml-a", "opml-b", "opml-c"):
        site.add(name, "rss", [], title=name.upper())
    r = c.post("/api/v1/feeds/opml", files={"file": ("subs.opml", OPML.replace(b"URL", site.url.encode()))})
    assert r.status_code == 200, r.text
    result = r.json()
    assert (result["added"], result["already_followed"], result["refused"]) == (3, 1, 1), result
    assert result["refusals"][0]["line"] == 12 and "names none" in result["refusals"][0]["error"]
    folders = {f["name"]: f["id"] for f in c.get("/api/v1/folders").json()["folders"]}
    assert set(folders) >= {"Science", "Science / Space"}
    by_url = {f["url"]: f for f in c.get("/api/v1/feeds").json()["feeds"]}
    assert by_url[f"{site.url}/feeds/opml-a"]["folder_id"] == folders["Science"]
    assert by_url[f"{site.url}/feeds/opml-b"]["folder_id"] == folders["Science / Space"]
    assert by_url[f"{site.url}/feeds/opml-c"]["folder_id"] is None
    again = c.post("/api/v1/feeds/opml", files={"file": ("s.opml", OPML.replace(b"URL", site.url.encode()))})
    assert (again.json()["added"], again.json()["already_followed"]) == (0, 4)

    out = c.get("/api/v1/feeds/opml")
    assert out.status_code == 200 and out.headers["content-type"].startswith("text/x-opml")
    text = out.text
    assert text.startswith("<?xml") and '<opml version="2.0">' in text
    assert f'xmlUrl="{site.url}/feeds/opml-a"' in text and 'text="Science / Space"' in text
    # the export reads back in (another account gets the same feeds and folders)
    other = api(new_user(user.admin).token(write=True))
    back = other.post("/api/v1/feeds/opml", files={"file": ("lev.opml", out.content)}).json()
    assert back["added"] == 3 and back["refused"] == 0, back

    bad = err(c.post("/api/v1/feeds/opml", files={"file": ("x.opml", b"<?xml version='1.0'?>\n<rss>\n</rss>")}),
              400, "invalid_body")
    assert bad["line"] == 2 and "not OPML" in bad["message"]
    bad = err(c.post("/api/v1/feeds/opml", files={"file": ("x.opml", b"<opml>\n<body>\n<outline>\n</opml>")}),
              400, "invalid_body")
    assert bad["line"] == 4 and "not well-formed" in bad["message"]
    err(c.post("/api/v1/feeds/opml", data={"x": "1"}, files={"other": ("a", b"b")}), 400, "invalid_body")


@pytest.mark.parametrize("fmt", ["rss", "atom", "json"])
def test_an_entry_whose_page_has_no_readable_text_is_kept_from_the_feeds_own_text(api, user: User, site: FeedSite,
                                                                                  fmt: str) -> None:
    """A short post (a page of one line, under the 200 characters a fetched page needs) is stored from the entry's
    own text in the feed (RSS description, Atom content, JSON Feed content_html) and found by search; an entry
    whose page reads keeps the page's text; one with neither fails saying why."""
    c = api(user.token(write=True))
    base = {"rss": 700, "atom": 710, "json": 720}[fmt]
    said = f"<p>The harbour master of port {base} logged a <b>spring tide</b> at dawn &amp; the boats rose.</p>"
    url = site.add(f"posts-{fmt}", fmt, [FeedEntry(base + 2, content=said, short=True),
                                        FeedEntry(base + 1, content="<p>Only a teaser.</p>"),
                                        FeedEntry(base, short=True)])
    feed = c.post("/api/v1/feeds", json={"url": url}).json()
    wait_feed(c, feed["id"], lambda f: f["entries_pending"] == 0 and f["entries_found"] == 3)
    by_url = {i["url"]: i for i in items(c)}
    kept = c.get(f"/api/v1/items/{by_url[f'{site.url}/short/{base + 2}']['id']}").json()
    assert kept["status"] == "ready", kept
    assert f"The harbour master of port {base} logged a spring tide at dawn & the boats rose." in kept["text"]
    assert "<" not in kept["text"] and kept["metadata"]["captured"] == "feed"
    page = c.get(f"/api/v1/items/{by_url[f'{site.url}/a/{base + 1}']['id']}").json()
    assert page["status"] == "ready" and f"Part {base + 1} of the series" in page["text"]
    assert "teaser" not in page["text"]
    failed = by_url[f"{site.url}/short/{base}"]
    assert failed["status"] == "failed" and "no readable text" in failed["error"], failed
    hits = c.get("/api/v1/search", params={"q": f"harbour master port {base} spring tide", "mode": "keyword"}).json()
    assert hits["results"] and hits["results"][0]["item_id"] == kept["id"], hits
