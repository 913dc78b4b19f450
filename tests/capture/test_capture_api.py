"""`POST /api/v1/ingest` kind `page` (a page as the user's browser rendered it) and the `url` filter of
`GET /api/v1/items`, over HTTP against the live server: the text as trafilatura extracts it, the privacy rule
proved with two users, re-capture updating the one item, bad input refused with nothing stored, and the token rules
(capability, scope, one-folder filing, the monthly write cap) as for any ingest."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.test_rest_foundation import err
from tests.sites import MEMBERS, Site, article_html, generated_article
from tests.stack import User, new_user

MAX_HTML = 5_242_880


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def member_html(slug: str) -> str:
    return article_html(*MEMBERS[slug]).decode()


def capture(c: httpx.Client, url: str, html: str, **extra: Any) -> httpx.Response:
    return c.post("/api/v1/ingest", json={"kind": "page", "url": url, "html": html, "auto_transform": False,
                                          **extra})


def item_count(user: User) -> int:
    return int(user.admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=user.id)[0][0])


def hits(c: httpx.Client, q: str) -> list[dict[str, Any]]:
    r = c.get("/api/v1/search", params={"q": q, "mode": "keyword", "limit": 10})
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


def test_a_captured_page_is_extracted_like_a_fetched_one_and_searchable(server, api, user, site) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    url = f"{site.url}/members/tides"
    fetched = c.post("/api/v1/ingest", json={"kind": "url", "url": url})  # Lev's own fetch meets the sign-in form
    assert err(fetched, 400, "ingest_failed")["message"].startswith("page has no readable text")
    before = len(site.hits)
    r = capture(c, url + "#top", member_html("tides"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready" and body["folder_id"] is None
    assert len(site.hits) == before  # nothing the page references (or the page itself) was fetched
    item = c.get(f"/api/v1/items/{body['user_item_id']}").json()
    assert item["kind"] == "url" and item["url"] == url + "#top"
    assert item["title"] == "Members only: the secret life of tide pools"
    assert "ochre sea star" in item["text"] and "Cookie settings" not in item["text"]  # trafilatura's cut
    assert item["metadata"]["captured"] == "browser" and item["metadata"]["author"] == "Ada Writer"
    assert [h["item_id"] for h in hits(c, "ochre sea star")] == [body["user_item_id"]]
    # the toolbar's question: is this page in my library? (by the URL as given or its canonical form)
    for asked in (url, url + "?utm_source=mail", url + "#top"):
        listed = c.get("/api/v1/items", params={"url": asked, "per_page": 1}).json()
        assert listed["total"] == 1 and listed["items"][0]["id"] == body["user_item_id"], asked
    assert c.get("/api/v1/items", params={"url": f"{site.url}/members/glaciers"}).json()["total"] == 0


def test_privacy_rule_with_two_users(server, api, admin, site) -> None:  # type: ignore[no-untyped-def]
    alice, bob, carol = new_user(admin), new_user(admin), new_user(admin)
    a, b, c = (api(u.token(write=True)) for u in (alice, bob, carol))
    url = f"{site.url}/teaser/tides"
    # Bob saves the URL first by server fetch: the public preview, a shared content
    bob_item = b.post("/api/v1/ingest", json={"kind": "url", "url": url, "auto_transform": False}).json()
    assert "free preview" in b.get(f"/api/v1/items/{bob_item['user_item_id']}").json()["text"]
    # Alice captures the members' version in her browser: her own content, not Bob's shared one
    mine = capture(a, url, member_html("tides")).json()
    assert mine["content_id"] != bob_item["content_id"]
    assert "free preview" in b.get(f"/api/v1/items/{bob_item['user_item_id']}").json()["text"]  # not overwritten
    assert "ochre sea star" in a.get(f"/api/v1/items/{mine['user_item_id']}").json()["text"]
    # Carol's server fetch of the URL shares Bob's content, never Alice's capture
    carol_item = c.post("/api/v1/ingest", json={"kind": "url", "url": url, "auto_transform": False}).json()
    assert carol_item["content_id"] == bob_item["content_id"]
    # nobody else's search finds what Alice's browser saw; Alice's does
    assert hits(b, "ochre sea star") == [] and hits(c, "ochre sea star") == []
    assert [h["item_id"] for h in hits(a, "ochre sea star")] == [mine["user_item_id"]]
    assert b.get(f"/api/v1/items/{mine['user_item_id']}").status_code == 404
    assert b.get("/api/v1/items", params={"url": url}).json()["items"][0]["id"] == bob_item["user_item_id"]
    # a later server fetch of the URL by Alice answers her captured item and never replaces it
    again = a.post("/api/v1/ingest", json={"kind": "url", "url": url + "?utm_campaign=x"}).json()
    assert (again["user_item_id"], again["content_id"]) == (mine["user_item_id"], mine["content_id"])
    assert "ochre sea star" in a.get(f"/api/v1/items/{mine['user_item_id']}").json()["text"]
    # capturing it again updates Alice's item: the same item, the new text, no duplicate, nothing left behind
    count = item_count(alice)
    newer = member_html("tides").replace("forty-two species", "fifty-seven species")
    updated = capture(a, url, newer, title="Tide pools, revised").json()
    assert updated["user_item_id"] == mine["user_item_id"] and updated["content_id"] != mine["content_id"]
    assert item_count(alice) == count
    got = a.get(f"/api/v1/items/{mine['user_item_id']}").json()
    assert "fifty-seven species" in got["text"] and got["title"] == "Tide pools, revised"
    assert [h["item_id"] for h in hits(a, "fifty-seven")] == [mine["user_item_id"]] and hits(a, "forty-two") == []
    assert admin.sql("SELECT count(*) FROM contents WHERE id = :c", c=mine["content_id"])[0][0] == 0
    assert a.get("/api/v1/items", params={"url": url}).json()["total"] == 1
    # Bob captures it too: his own second content, Alice's and the shared one untouched
    bobs = capture(b, url, member_html("tides").replace("Pescadero", "Half Moon Bay")).json()
    assert bobs["content_id"] not in (updated["content_id"], bob_item["content_id"])
    assert "Half Moon Bay" not in a.get(f"/api/v1/items/{mine['user_item_id']}").json()["text"]
    assert hits(a, "Half Moon Bay") == [] and hits(c, "Half Moon Bay") == []
    assert "free preview" in c.get(f"/api/v1/items/{carol_item['user_item_id']}").json()["text"]


def test_a_selection_keeps_the_pages_url_and_title(server, api, user, site) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    url = f"{site.url}/members/glaciers"
    r = c.post("/api/v1/ingest", json={"kind": "text", "text": "Glaciers grind bedrock with frozen stones.",
                                       "title": "Members only: how glaciers carve valleys", "source_url": url})
    assert r.status_code == 200, r.text
    item = c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()
    assert item["kind"] == "text" and item["title"] == "Members only: how glaciers carve valleys"
    assert item["metadata"]["source_url"] == url and item["text"] == "Glaciers grind bedrock with frozen stones."
    count = item_count(user)
    for body in ({"kind": "text", "text": "x", "source_url": "ftp://example.com/"},
                 {"kind": "text", "text": "x", "source_url": " "},
                 {"kind": "url", "url": url, "source_url": url}):
        err(c.post("/api/v1/ingest", json=body), 400, "invalid_body")
    assert item_count(user) == count


def test_bad_pages_are_refused_and_nothing_is_stored(server, api, user, site) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    url = f"{site.url}/members/tides"
    count = item_count(user)
    cases = [
        ({"kind": "page", "url": url, "html": ""}, 400, "invalid_body", "html"),
        ({"kind": "page", "url": url, "html": "  \n\t "}, 400, "invalid_body", "html"),
        ({"kind": "page", "url": url, "html": "Just some plain text that a page would never be."}, 400,
         "invalid_body", "not an HTML document"),
        ({"kind": "page", "url": url, "html": '{"json": "is not a page"}'}, 400, "invalid_body", "HTML"),
        ({"kind": "page", "url": "ftp://example.com/a.html", "html": member_html("tides")}, 400, "invalid_body",
         "http or https"),
        ({"kind": "page", "url": "javascript:alert(1)", "html": member_html("tides")}, 400, "invalid_body",
         "http or https"),
        ({"kind": "page", "url": "http://[::1/", "html": member_html("tides")}, 400, "invalid_body", "parsed"),
        ({"kind": "page", "url": url}, 400, "invalid_body", "html"),
        ({"kind": "page", "html": member_html("tides")}, 400, "invalid_body", "url"),
        ({"kind": "page", "url": url, "html": member_html("tides"), "text": "x"}, 400, "invalid_body", "text"),
        ({"kind": "page", "url": url, "html": "<html><body><div><span> </span></div></body></html>"}, 400,
         "ingest_failed", "no readable text"),
        ({"kind": "url", "url": url, "html": "<p>x</p>"}, 400, "invalid_body", "html"),
    ]
    for body, status, code, words in cases:
        found = err(c.post("/api/v1/ingest", json=body), status, code)
        assert words.lower() in found["message"].lower(), (body, found)
    assert item_count(user) == count


def test_html_up_to_five_mib_is_taken_and_past_it_is_413(server, api, user) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    url = f"https://example.com/big/{uuid.uuid4().hex}"
    head = article_html(*MEMBERS["glaciers"]).decode().replace("</body>", "<!-- ")
    tail = " --></body></html>"
    pad = MAX_HTML - len(head.encode()) - len(tail.encode())
    html = head + '\\"' * (pad // 2) + "x" * (pad % 2) + tail  # escaped in JSON, the body is twice as large
    assert len(html.encode()) == MAX_HTML
    count = item_count(user)
    r = capture(c, url, html)
    assert r.status_code == 200, r.text[:300]
    assert "cirques above Lauterbrunnen" in c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()["text"]
    over = capture(c, url + "/more", html[:-len(tail)] + "x" + tail)
    body = err(over, 413, "file_too_large")
    assert body["maxBytes"] == MAX_HTML and "5242880" in body["message"]
    huge = c.post("/api/v1/ingest", content=b'{"kind": "page", "url": "' + url.encode() + b'", "html": "'
                  + b"\\u0041" * 2_000_000 + b'"}', headers={"content-type": "application/json"})
    assert err(huge, 413, "file_too_large")["maxBytes"] == MAX_HTML  # past the request cap, before parsing
    assert item_count(user) == count + 1


def test_token_rules_apply_as_to_any_ingest(server, api, user, site) -> None:  # type: ignore[no-untyped-def]
    url = f"{site.url}/members/glaciers"
    html = member_html("glaciers")
    read_only = api(user.token())
    body = err(capture(read_only, url, html), 403, "capability_denied")
    assert body["required"] == "write"
    papers, recipes = user.folder(f"Papers {uuid.uuid4().hex[:6]}"), user.folder(f"Recipes {uuid.uuid4().hex[:6]}")
    one = api(user.token(write=True, folders=[papers]))
    filed = capture(one, url, html).json()
    assert filed["folder_id"] == papers  # a one-folder token files into its folder
    assert err(capture(one, url, html, folder_id=recipes), 403, "forbidden_scope")["out_of_scope"] == [recipes]
    whole = api(user.token(write=True))
    assert err(capture(whole, url, html, folder_id=str(uuid.uuid4())), 404, "folder_not_found")
    # the whole-library token re-captures the same item and files it into a second folder
    again = capture(whole, url, html, folder_id=recipes).json()
    assert again["user_item_id"] == filed["user_item_id"] and again["folder_id"] == recipes
    assert sorted(whole.get(f"/api/v1/items/{filed['user_item_id']}").json()["folder_ids"]) == sorted(
        [papers, recipes])
    # a token that cannot see the earlier capture gets its own item, never a write to one outside its scope
    other = user.folder(f"Other {uuid.uuid4().hex[:6]}")
    scoped = capture(api(user.token(write=True, folders=[other])), url, html).json()
    assert scoped["user_item_id"] != filed["user_item_id"] and scoped["folder_id"] == other
    assert api(user.token(folders=[other])).get("/api/v1/items", params={"url": url}).json()["total"] == 1
    capped = api(user.token(write=True, write_cap=1))
    assert capture(capped, url + "?a=1", html).status_code == 200
    limited = err(capture(capped, url + "?a=2", html), 429, "rate_limited")
    assert limited["limit"] == "monthly_writes" and limited["retry_after_sec"] > 0


def test_url_filter_is_scoped_and_checked(server, api, user, admin) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    url = f"https://example.com/notes/{uuid.uuid4().hex}"
    html = "<html><body><p>Paper lanterns are folded from mulberry paper.</p></body></html>"
    r = c.post("/api/v1/ingest", json={"kind": "page", "url": url, "html": html})
    assert r.status_code == 200, r.text
    note = r.json()
    folder = user.folder(f"Scoped {uuid.uuid4().hex[:6]}")
    assert api(user.token(folders=[folder])).get("/api/v1/items", params={"url": url}).json()["total"] == 0
    assert api(new_user(admin).token()).get("/api/v1/items", params={"url": url}).json()["total"] == 0
    assert c.get("/api/v1/items", params={"url": url}).json()["items"][0]["id"] == note["user_item_id"]
    for bad in ("ftp://example.com/", "not a url", "javascript:alert(1)"):
        err(c.get("/api/v1/items", params={"url": bad}), 400, "invalid_body")
    assert c.get("/api/v1/items", params={"url": "http://[::1/"}).json()["total"] == 0  # no canonical form


def test_a_long_capture_is_finished_by_the_worker_and_a_recapture_replaces_it(server, api, user) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    url = f"https://example.com/long/{uuid.uuid4().hex}"
    paragraphs = [p for n in range(100) for p in generated_article(n)[1]]
    r = capture(c, url, article_html("A very long page", paragraphs).decode())
    assert r.status_code == 200 and r.json()["status"] == "processing", r.text[:300]
    item_id = r.json()["user_item_id"]
    deadline = time.monotonic() + 180
    while c.get(f"/api/v1/items/{item_id}").json()["status"] != "ready":
        assert time.monotonic() < deadline, "the worker did not finish the captured page"
        time.sleep(0.5)
    assert [h["item_id"] for h in hits(c, "practitioners")][:1] == [item_id]
    again = capture(c, url, member_html("glaciers")).json()  # the page changed: the same item, the new text only
    assert again["user_item_id"] == item_id and again["status"] == "ready"
    assert hits(c, "practitioners") == [] and [h["item_id"] for h in hits(c, "Lauterbrunnen")] == [item_id]
