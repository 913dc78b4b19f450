"""POST /api/v1/imports and GET /api/v1/imports/{id}: a Chromium bookmark export with nested folders, Pocket and
Raindrop CSV exports, re-runs that add nothing twice, dead links that end as failed items, bad files (400 with the
line), the size bound (413), the token rules and the one write an import costs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fixtures_imports import chromium_bookmarks, pocket_csv, raindrop_csv
from tests.sites import Site
from tests.stack import Admin, User, new_user

MAX_BYTES = 10 * 1024 * 1024


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def post_file(c: httpx.Client, data: bytes, name: str = "bookmarks.html") -> httpx.Response:
    return c.post("/api/v1/imports", files={"file": (name, data, "application/octet-stream")})


def wait_done(c: httpx.Client, import_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        r = c.get(f"/api/v1/imports/{import_id}")
        assert r.status_code == 200, r.text
        body = r.json()
        if body["status"] == "done":
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.3)


def run_import(c: httpx.Client, data: bytes, name: str = "bookmarks.html") -> dict[str, Any]:
    r = post_file(c, data, name)
    assert r.status_code == 202, r.text
    return wait_done(c, r.json()["id"])


def items_by_url(c: httpx.Client) -> dict[str, dict[str, Any]]:
    found = c.get("/api/v1/items", params={"per_page": 100}).json()["items"]
    return {i["url"]: i for i in found if i["url"]}


def err(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["error"] == code, body
    return body


def test_chromium_bookmarks_keep_their_folders_and_a_rerun_adds_nothing(api, user: User, site: Site) -> None:
    c = api(user.token(write=True, kb_only=False))
    existing = user.folder("bookmarks bar / science")  # the user has it already: the file's folder reuses it
    base = site.url
    bar = [
        ("link", "Volcanoes & magma", f"{base}/volcano"),
        ("folder", "Science", [
            ("link", "Entanglement", f"{base}/quantum"),
            ("folder", "Earth", [("link", "Volcanoes again", f"{base}/volcano?utm_source=newsletter")]),
            ("link", "A page that is gone", f"{base}/missing"),
        ]),
        ("folder", "Recipes", [("link", "Sourdough", f"{base}/sourdough")]),
        ("folder", "recipes", [("link", "Article 7", f"{base}/a/7")]),  # a sibling differing in case only
    ]
    other = [("link", "Bookmarklet", "javascript:alert(1)"), ("link", "Nowhere", "http://127.0.0.1:9/refused")]
    data = chromium_bookmarks(bar, other)

    r = post_file(c, data)
    assert r.status_code == 202, r.text
    first = r.json()
    assert first["format"] == "netscape" and first["total"] == 6 and first["status"] in ("running", "done")
    assert first["skipped"] == [{"line": 30, "url": "javascript:alert(1)",
                                 "reason": "only http and https links can be imported"}]
    done = wait_done(c, first["id"])
    assert (done["total"], done["done"], done["failed"], done["pending"]) == (6, 4, 2, 0), done
    names = {f["name"]: f for f in done["folders"]}
    assert set(names) == {"Bookmarks bar", "Bookmarks bar / Recipes", "Bookmarks bar / recipes (2)",
                          "Bookmarks bar / Science / Earth", "bookmarks bar / science"}
    assert done["folders_created"] == 4 and names["bookmarks bar / science"]["id"] == existing
    assert names["bookmarks bar / science"]["item_count"] == 2
    reasons = {f["url"]: f["error"] for f in done["failures"]}
    assert set(reasons) == {f"{base}/missing", "http://127.0.0.1:9/refused"}
    assert "404" in reasons[f"{base}/missing"] and "refused" in reasons["http://127.0.0.1:9/refused"]

    items = items_by_url(c)
    volcano = items[f"{base}/volcano"]  # one item for both saves of the page, in both folders
    assert f"{base}/volcano?utm_source=newsletter" not in items
    assert sorted(volcano["folder_ids"]) == sorted([names["Bookmarks bar"]["id"],
                                                   names["Bookmarks bar / Science / Earth"]["id"]])
    assert volcano["status"] == "ready" and volcano["title"] == "Volcanoes & magma"
    full = c.get(f"/api/v1/items/{volcano['id']}").json()
    assert full["metadata"]["added_at"].startswith("2023-11-14T")
    gone = items[f"{base}/missing"]
    assert gone["status"] == "failed" and gone["error"] == reasons[f"{base}/missing"]
    assert gone["folder_ids"] == [existing]
    assert items["http://127.0.0.1:9/refused"]["folder_ids"] == []  # "Other bookmarks" children stay unfiled
    hits = c.get("/api/v1/search", params={"q": "how does magma rise through the crust", "limit": 3}).json()
    assert hits["results"][0]["item_id"] == volcano["id"]

    again = run_import(c, data)  # the same file once more: nothing twice, the same folders
    assert (again["total"], again["done"], again["failed"], again["already_present"]) == (6, 6, 0, 6), again
    assert again["folders_created"] == 0
    assert sorted(f["id"] for f in again["folders"]) == sorted(f["id"] for f in done["folders"])
    assert len(items_by_url(c)) == 6
    assert len(c.get("/api/v1/folders").json()["folders"]) == 5
    listed = c.get("/api/v1/imports").json()["imports"]
    assert [i["id"] for i in listed[:2]] == [again["id"], first["id"]]


def test_pocket_and_raindrop_exports_keep_tags_state_and_collections(api, user: User, site: Site) -> None:
    c = api(user.token(write=True, kb_only=False))
    pocket = pocket_csv([
        {"title": "Quantum", "url": f"{site.url}/quantum", "tags": "physics|to read", "status": "archive"},
        {"title": "Article 11", "url": f"{site.url}/a/11", "time_added": "1712345678"},
    ])
    done = run_import(c, pocket, "part_000000.csv")
    assert (done["format"], done["total"], done["done"], done["folders"]) == ("pocket", 2, 2, [])
    items = items_by_url(c)
    quantum = c.get(f"/api/v1/items/{items[f'{site.url}/quantum']['id']}").json()
    assert quantum["archived"] is True and quantum["tags"] == ["physics", "to read"]
    assert "tags" not in quantum["metadata"]  # real tags now, not the file's words in the metadata
    assert quantum["title"] == "Quantum" and quantum["folder_ids"] == []
    assert c.get(f"/api/v1/items/{items[f'{site.url}/a/11']['id']}").json()["metadata"]["added_at"] \
        .startswith("2024-04-05")

    raindrop = raindrop_csv([
        {"title": "Bread", "url": f"{site.url}/sourdough", "folder": "Kitchen/Baking", "tags": "bread, yeast",
         "note": "try the overnight proof", "favorite": "true"},
        {"title": "Article 12", "url": f"{site.url}/a/12", "folder": "Unsorted"},
        {"title": "Quantum", "url": f"{site.url}/quantum", "folder": "Kitchen"},  # already there: only filed
    ])
    done = run_import(c, raindrop, "export.csv")
    assert (done["format"], done["total"], done["done"], done["already_present"]) == ("raindrop", 3, 3, 1)
    assert sorted(f["name"] for f in done["folders"]) == ["Kitchen", "Kitchen / Baking"]
    items = items_by_url(c)
    bread = c.get(f"/api/v1/items/{items[f'{site.url}/sourdough']['id']}").json()
    assert bread["tags"] == ["bread", "yeast"] and bread["metadata"]["note"] == "try the overnight proof"
    assert bread["metadata"]["favorite"] is True
    assert items[f"{site.url}/a/12"]["folder_ids"] == []
    kitchen = next(f["id"] for f in done["folders"] if f["name"] == "Kitchen")
    assert items[f"{site.url}/quantum"]["folder_ids"] == [kitchen]
    # the tags are the user's, not the shared page's: another user saving the page sees none of them
    other = new_user(user.admin)
    oc = httpx.Client(base_url=c.base_url, headers={"Authorization": f"Bearer {other.token(write=True)}"})
    shared = oc.post("/api/v1/ingest", json={"kind": "url", "url": f"{site.url}/sourdough"}).json()
    assert shared["content_id"] == bread["content_id"]
    theirs = oc.get(f"/api/v1/items/{shared['user_item_id']}").json()
    assert theirs["tags"] == [] and "tags" not in theirs["metadata"]


BAD_FILES = [
    (b"", 1, "empty"),
    (b"\xef\xbb\xbfname,address\nx,y\n", 1, "url column"),
    (b"title,url\nok,https://example.com/\n\xff\xfe broken\n", 3, "not UTF-8"),
    (b"title,url\nok,https://example.com/\nextra,https://example.com/2,surplus\n", 3, "3 fields"),
    (b"title,url\nok,https://example.com/\nno url,\n", 3, "url column is empty"),
    (b"title,url\n\"open quote,https://example.com/\n", 2, "1 fields"),
    (b"<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n<DT><A ADD_DATE=\"1\">no href</A>\n</DL>", 3, "without HREF"),
    (b"<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n</DL><p>\n</DL><p>\n", 4, "never opened"),
    (b'{"type": "lev_export", "version": 1}\n{"type": "item", "id": "i1"}\n', 2, "url or a text"),
    (b'{"type": "lev_export", "version": 1}\n{"type": "item", "id": "i1", "url": "https://e.com/",'
     b' "folder_ids": ["f9"]}\n', 2, "no earlier folder line"),
    (b'{"type": "lev_export", "version": 1}\n{not json}\n', 2, "not JSON"),
    (b'{"type": "lev_export", "version": 2}\n', 1, "version"),
    (b'{"type": "lev_export", "version": 1}\n{"type": "folder", "id": "f1", "name": "A"}\n', 3, "no end line"),
    (b'{"type": "folder", "id": "f1", "name": "A"}\n', 1, "starts with"),
]


@pytest.mark.parametrize(("data", "line", "says"), BAD_FILES)
def test_a_bad_file_is_a_400_naming_the_line_and_stores_nothing(api, user: User, data: bytes, line: int,
                                                                 says: str) -> None:
    c = api(user.token(write=True))
    body = err(post_file(c, data, "bad.txt"), 400, "invalid_body")
    assert body["line"] == line and body["message"].startswith(f"line {line}: "), body
    assert says in body["message"], body
    assert c.get("/api/v1/imports").json()["imports"] == []
    assert c.get("/api/v1/folders").json()["folders"] == []


def test_size_bound_form_and_token_rules(api, user: User, admin: Admin) -> None:
    c = api(user.token(write=True))
    body = err(post_file(c, b"title,url\n" + b"x" * (MAX_BYTES - 9)), 413, "file_too_large")
    assert body["maxBytes"] == MAX_BYTES and "10485760" in body["message"]
    body = err(post_file(c, b"x" * (MAX_BYTES + 200_000)), 413, "file_too_large")  # refused before it is read
    assert body["maxBytes"] == MAX_BYTES
    assert c.get("/api/v1/imports").json()["imports"] == []
    err(c.post("/api/v1/imports", files={"other": ("a.csv", b"url\nhttps://e.com/")}), 400, "invalid_body")
    err(c.post("/api/v1/imports", data={"note": "no file"}), 415, "unsupported_media_type")
    nameless = b"--b0\r\n\r\nurl\nhttps://e.com/\r\n--b0--\r\n"  # a part without Content-Disposition: was a 500
    body = err(c.post("/api/v1/imports", content=nameless,
                      headers={"Content-Type": "multipart/form-data; boundary=b0"}), 400, "invalid_body")
    assert "multipart/form-data" in body["message"]
    err(c.post("/api/v1/imports", json={"file": "url\nhttps://e.com/"}), 415, "unsupported_media_type")

    ok = post_file(c, b"url\n")
    assert ok.status_code == 202 and ok.json()["status"] == "done" and ok.json()["total"] == 0, ok.text
    import_id = ok.json()["id"]
    read_only = api(user.token())
    body = err(post_file(read_only, b"url\nhttps://e.com/\n"), 403, "capability_denied")
    assert body["required"] == "write"
    assert read_only.get(f"/api/v1/imports/{import_id}").status_code == 200  # reading progress needs read only
    folder = user.folder("Only this")
    scoped = api(user.token(write=True, folders=[folder]))
    err(post_file(scoped, b"url\nhttps://e.com/\n"), 403, "forbidden_scope")
    err(scoped.get(f"/api/v1/imports/{import_id}"), 403, "forbidden_scope")
    err(scoped.get("/api/v1/imports"), 403, "forbidden_scope")
    err(scoped.get("/api/v1/export"), 403, "forbidden_scope")
    stranger = api(new_user(admin).token(write=True))
    err(stranger.get(f"/api/v1/imports/{import_id}"), 404, "not_found")
    err(c.get("/api/v1/imports/00000000-0000-0000-0000-000000000000"), 404, "not_found")
    err(c.get("/api/v1/imports/not-a-uuid"), 400, "invalid_id")
    err(api(None).post("/api/v1/imports", files={"file": ("a.csv", b"url\n")}), 401, "missing_bearer_token")


def test_an_import_is_one_write_against_the_monthly_cap(api, user: User, site: Site) -> None:
    token = user.token(write=True, write_cap=1)
    c = api(token)
    links = b"title,url\n" + b"".join(f"A{n},{site.url}/a/{n}\n".encode() for n in range(40, 46))
    done = run_import(c, links, "six.csv")
    assert done["done"] == 6
    assert c.get("/api/v1/token").json()["monthly_writes"]["used"] == 1
    body = err(post_file(c, links, "six.csv"), 429, "rate_limited")
    assert body["limit"] == "monthly_writes"
