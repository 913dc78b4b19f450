"""Ingest of text and web pages and hybrid search, over HTTP against the live server."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tests.sites import Site


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def ingest(c, **body):  # type: ignore[no-untyped-def]
    return c.post("/api/v1/ingest", json=body)


def test_ingest_pages_and_snippets_then_each_mode_finds_the_right_item(server, api, user, site) -> None:
    c = api(user.token(write=True))
    ids = {}
    for path in ("/volcano", "/sourdough", "/quantum"):
        r = ingest(c, kind="url", url=site.url + path, auto_transform=False)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "ready" and body["folder_id"] is None
        ids[path] = body["user_item_id"]
    r = ingest(c, kind="text", title="Tide pools", text="Tide pools host anemones, hermit crabs and sea stars "
               "that survive the daily rhythm of the ocean tides along rocky shores.")
    assert r.status_code == 200 and r.json()["status"] == "ready"
    ids["tide"] = r.json()["user_item_id"]
    cases = {
        "/volcano": "where does magma come from and why do mountains erupt",
        "/sourdough": "wild yeast starter fermentation loaf",
        "/quantum": "spooky action at a distance between photons",
        "tide": "anemones and hermit crabs",
    }
    for expected, q in cases.items():
        for mode in ("hybrid", "semantic", "keyword"):
            r = c.get("/api/v1/search", params={"q": q, "mode": mode, "limit": 5})
            assert r.status_code == 200, r.text
            res = r.json()
            assert res["mode"] == mode
            if mode == "keyword" and expected == "/volcano":
                continue  # a natural-language question: all words must match in keyword mode
            assert res["results"], (mode, q)
            top = res["results"][0]
            assert top["item_id"] == ids[expected], (mode, q, top["title"])
            assert set(top) == {"chunk_id", "item_id", "title", "url", "text", "score", "similarity",
                                "keyword_rank", "kind", "saved_at", "location", "tags"}
            assert set(top["location"]) == {"char_start", "char_end", "heading"}
            if mode == "keyword":
                assert top["similarity"] is None and top["keyword_rank"] > 0
            if mode == "semantic":
                assert top["keyword_rank"] is None and 0 < top["similarity"] <= 1
    item = c.get(f"/api/v1/items/{ids['/volcano']}").json()
    assert item["title"] == "How volcanoes form" and item["kind"] == "url"
    assert "tectonic plates" in item["text"] and "Cookie settings" not in item["text"]
    assert item["metadata"].get("author") == "Ada Writer"


def test_search_errors(server, api, user) -> None:
    c = api(user.token())
    bad = ({"q": ""}, {"q": "   "}, {"q": "x", "limit": 0}, {"q": "x", "limit": 51}, {"q": "x", "mode": "fuzzy"}, {})
    for params in bad:
        r = c.get("/api/v1/search", params=params)
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", (params, r.text)
    r = c.get("/api/v1/search", params={"q": "x", "folder_id": str(uuid.uuid4())})
    assert r.status_code == 404


def test_dedup_shares_content_but_not_items(server, api, user, admin, site) -> None:
    from tests.stack import new_user

    other = new_user(admin)
    hits_before = len(site.hits)
    a = ingest(api(user.token(write=True)), kind="url", url=site.url + "/sourdough?utm_source=x#top").json()
    b = ingest(api(other.token(write=True)), kind="url", url=site.url.replace("127.0.0.1", "127.0.0.1") +
               "/sourdough").json()
    assert a["content_id"] == b["content_id"] and a["user_item_id"] != b["user_item_id"]
    n = admin.sql("SELECT count(*) FROM contents WHERE id = :c", c=a["content_id"])[0][0]
    assert n == 1
    # the shared record was fetched at most once across both ingests (earlier tests may have stored it)
    assert len(site.hits) - hits_before <= 1


def test_a_title_given_to_a_shared_page_stays_its_givers(server, api, user, admin, site) -> None:
    """The stored page is shared by everyone who saves its URL; a title one user gives it (a bookmark's name, an
    import's) is that user's item's alone: another user's item, its passages and search never show it."""
    from tests.sites import generated_article
    from tests.stack import new_user

    n = 700_000 + uuid.uuid4().int % 100_000  # an article no other test stored
    page_title = generated_article(n)[0]
    url = f"{site.url}/a/{n}"
    mine = ingest(api(user.token(write=True)), kind="url", url=url, title="Zanzibar layoffs, keep quiet").json()
    other = new_user(admin)
    c = api(other.token(write=True))
    theirs = ingest(c, kind="url", url=url).json()
    assert mine["content_id"] == theirs["content_id"]
    given = api(user.token()).get(f"/api/v1/items/{mine['user_item_id']}").json()["title"]
    assert given == "Zanzibar layoffs, keep quiet"
    assert c.get(f"/api/v1/items/{theirs['user_item_id']}").json()["title"] == page_title
    assert admin.sql("SELECT title FROM contents WHERE id = :c", c=mine["content_id"]) == [(page_title,)]
    for mode in ("keyword", "hybrid"):
        hits = c.get("/api/v1/search", params={"q": "Zanzibar layoffs", "mode": mode}).json()["results"]
        assert all("Zanzibar" not in (h.get("title") or "") + (h.get("text") or "") for h in hits), hits


def test_ingest_url_errors_store_nothing(server, api, user, admin, site) -> None:
    c = api(user.token(write=True))
    before = admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=user.id)[0][0]
    cases = {
        "/missing": "404", "/login": "401", "/empty": "no readable text", "/binary": "content type",
        "/doc.pdf": "PDF", "/huge": "20 MB",
    }
    for path, words in cases.items():
        r = ingest(c, kind="url", url=site.url + path)
        assert r.status_code == 400, (path, r.text)
        body = r.json()
        assert body["error"] == "ingest_failed" and words.lower() in body["message"].lower(), (path, body)
    for url in ("http://127.0.0.1:1/", "https://www.youtube.com/watch?v=dQw4w9WgXcQ", "http://no-such-host.invalid/"):
        r = ingest(c, kind="url", url=url)
        assert r.status_code == 400 and r.json()["error"] == "ingest_failed", (url, r.text)
    assert admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=user.id)[0][0] == before


def test_ingest_body_validation(server, api, user) -> None:
    c = api(user.token(write=True))
    for body in ({"kind": "text"}, {"kind": "text", "text": "   "}, {"kind": "url"}, {"kind": "pdf", "url": "x"},
                 {"kind": "url", "url": "ftp://example.com/x"}, {"kind": "url", "url": "0"},  # the contract's http(s)
                 {"kind": "text", "text": "a", "url": "http://x"}, {"kind": "text", "text": "a", "bogus": 1}, {}):
        r = ingest(c, **body)
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", (body, r.text)
    r = ingest(api(user.token()), kind="text", text="hello")
    assert r.status_code == 403 and r.json()["error"] == "capability_denied"


def test_scope_isolation_and_auto_filing(server, api, user, admin) -> None:
    from tests.stack import new_user

    a, b = user.folder("A"), user.folder("B")
    one = api(user.token(write=True, folders=[a]))
    r = ingest(one, kind="text", title="Alpha note", text="The zebra migration crosses the Mara river in July.")
    assert r.json()["folder_id"] == a
    alpha = r.json()["user_item_id"]
    two = ingest(api(user.token(write=True, folders=[a, b])), kind="text", title="Beta note",
                 text="The zebra herd grazes quietly near the river at dawn.").json()
    assert two["folder_id"] is None
    unfiled = two["user_item_id"]
    inert = ingest(api(user.token(write=True)), kind="text", text="zebra stripes are unique like fingerprints",
                   in_kb=False).json()["user_item_id"]
    other = new_user(admin)
    ingest(api(other.token(write=True)), kind="text", text="A zebra is an African equine with stripes.")

    def found(tok: str) -> set[str]:
        res = api(tok).get("/api/v1/search", params={"q": "zebra", "limit": 50, "mode": "keyword"}).json()
        sem = api(tok).get("/api/v1/search", params={"q": "zebra", "limit": 50, "mode": "semantic"}).json()
        return {x["item_id"] for x in res["results"]} | {x["item_id"] for x in sem["results"]}

    assert found(user.token(folders=[a])) == {alpha}
    assert found(user.token(folders=[b])) == set()
    assert found(user.token()) == {alpha, unfiled}
    assert inert not in found(user.token(kb_only=False))
    assert alpha not in found(other.token())
    r = api(user.token(folders=[a])).get("/api/v1/search", params={"q": "zebra", "folder_id": b})
    assert r.status_code == 404
    r = api(user.token()).get("/api/v1/search", params={"q": "zebra", "folder_id": a, "mode": "keyword"})
    assert {x["item_id"] for x in r.json()["results"]} == {alpha}


def test_auto_transform_outputs_appear(server, api, user) -> None:
    c = api(user.token(write=True))
    text = (" ".join(["Photosynthesis converts light energy into chemical energy in plants.",
                      "Chlorophyll in the chloroplasts absorbs red and blue light.",
                      "The Calvin cycle fixes carbon dioxide into sugars.",
                      "Oxygen is released as a by-product of splitting water.",
                      "Without photosynthesis there would be little oxygen in the atmosphere."]))
    item_id = ingest(c, kind="text", title="Photosynthesis", text=text).json()["user_item_id"]
    deadline = time.monotonic() + 60
    outputs: list = []
    while time.monotonic() < deadline:
        outputs = c.get(f"/api/v1/items/{item_id}").json()["outputs"]
        if outputs:
            break
        time.sleep(0.5)
    kinds = {o["kind"]: o for o in outputs}
    assert set(kinds) == {"summary", "key_phrases"}
    assert "local" in kinds["summary"]["generator"]
    assert "Photosynthesis" in kinds["summary"]["content"] or "Chlorophyll" in kinds["summary"]["content"]
    no_tf = ingest(c, kind="text", text="no transform please", auto_transform=False).json()["user_item_id"]
    time.sleep(1.5)
    assert c.get(f"/api/v1/items/{no_tf}").json()["outputs"] == []


def test_text_snippet_without_title_gets_one_from_its_first_line(server, api, user) -> None:
    c = api(user.token(write=True))
    long_line = "word " * 40
    a = c.post("/api/v1/ingest", json={"kind": "text", "text": "Buy oat milk\nand bread", "auto_transform": False})
    b = c.post("/api/v1/ingest", json={"kind": "text", "text": long_line, "auto_transform": False})
    ta = c.get(f"/api/v1/items/{a.json()['user_item_id']}").json()
    tb = c.get(f"/api/v1/items/{b.json()['user_item_id']}").json()
    assert ta["title"] == "Buy oat milk" and ta["metadata"]["title_from_text"] is True
    assert tb["title"].endswith("…") and len(tb["title"]) <= 81
