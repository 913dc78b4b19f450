"""Imported data is bounded like the API's (issue 32): titles are cut to 500 characters, folder names to 200,
notes to 5,000, tags to 100 of 64 characters; a Lev export's metadata and outputs are cut too; and the item and
import pages render in bounded size whatever a file held."""

from __future__ import annotations

import html
import json
import time
import uuid
from typing import Any

import httpx

from tests.stack import Admin

UNREACHABLE = "http://127.0.0.1:9"  # refused at once: each link ends as a failed item keeping its title and tags
HEAD = "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n"


def signed_in(server_url: str, admin: Admin) -> tuple[httpx.Client, str]:
    c = httpx.Client(base_url=server_url, timeout=120)
    r = c.post("/api/account/signup", json={"email": f"b{uuid.uuid4().hex[:10]}@example.com",
                                            "password": "a long enough password"})
    assert r.status_code == 201, r.text
    admin.sql("UPDATE users SET tier = 'pro' WHERE id = :u", u=r.json()["user_id"])
    return c, r.json()["csrf_token"]


def run_import(c: httpx.Client, csrf: str, data: bytes, name: str) -> dict[str, Any]:
    r = c.post("/api/v1/imports", files={"file": (name, data, "text/plain")}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 180
    while True:
        body: dict[str, Any] = c.get(f"/api/v1/imports/{r.json()['id']}").json()
        if body["status"] == "done":
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.5)


def bookmarks() -> bytes:
    huge_tags = ",".join(f"tag{i}-" + "t" * 300 for i in range(300))
    links = "".join(f'<DT><A HREF="{UNREACHABLE}/n{i}">Link {i}</A>\n' for i in range(120))
    return (HEAD + f"<DT><H3>{'Outer ' * 200}</H3>\n<DL><p>\n<DT><H3>{'Inner ' * 200}</H3>\n<DL><p>\n"
            f'<DT><A HREF="{UNREACHABLE}/long" TAGS="{huge_tags}">{"Title " * 1000}</A>\n<DD>{"note " * 4000}\n'
            + links + "</DL><p>\n</DL><p>\n</DL><p>\n").encode()


def lev_export() -> bytes:
    lines: list[dict[str, Any]] = [
        {"type": "lev_export", "version": 1},
        {"type": "folder", "id": "f1", "name": "Folder " * 300},
        {"type": "item", "id": "i1", "url": f"{UNREACHABLE}/lev", "title": "Lev " * 1000, "folder_ids": ["f1"],
         "metadata": {"big": "x" * 500_000, "list": list(range(5000)), "deep": {"a": {"b": {"c": {"d": {"e": 1}}}}},
                      **{f"k{i}": i for i in range(300)}}},
        *({"type": "output", "item_id": "i1", "kind": "summary", "content": "s" * 300_000, "generator": "g"}
          for _ in range(30)),
        {"type": "end"},
    ]
    return "\n".join(json.dumps(line) for line in lines).encode()


def test_imported_titles_notes_tags_folders_metadata_and_outputs_are_cut_to_bounds(server, admin: Admin) -> None:
    c, csrf = signed_in(server.url, admin)
    done = run_import(c, csrf, bookmarks(), "bookmarks.html")
    assert done["total"] == 121 and done["failed"] == 121, {k: done[k] for k in ("total", "done", "failed")}
    run_import(c, csrf, lev_export(), "lev.jsonl")

    folders = c.get("/api/v1/folders").json()["folders"]
    assert len(folders) == 3 and all(len(f["name"]) <= 200 for f in folders), [len(f["name"]) for f in folders]
    items = c.get("/api/v1/items", params={"per_page": 100}).json()["items"]
    items += c.get("/api/v1/items", params={"per_page": 100, "page": 2}).json()["items"]
    assert len(items) == 122 and all(len(i["title"] or "") <= 500 for i in items), max(len(i["title"]) for i in items)
    by_url = {i["url"]: i for i in items}

    long = c.get(f"/api/v1/items/{by_url[UNREACHABLE + '/long']['id']}").json()
    assert long["title"].startswith("Title Title") and len(long["title"]) == 500
    tags = long["tags"]  # the file's 300 tags of 305 characters: 100 tags, each cut to a tag's 64 characters
    assert len(tags) == 100 and all(len(t) == 64 for t in tags) and tags[0].startswith("tag0-")
    assert 4000 < len(long["metadata"]["description"]) <= 5000

    lev = c.get(f"/api/v1/items/{by_url[UNREACHABLE + '/lev']['id']}").json()
    assert len(json.dumps(lev["metadata"])) < 25_000, len(json.dumps(lev["metadata"]))
    assert len(lev["outputs"]) <= 10 and all(len(o["content"]) <= 20_000 for o in lev["outputs"])

    page = c.get(f"/items/{long['id']}")
    assert page.status_code == 200 and len(page.text) < 100_000, len(page.text)
    page = c.get(f"/items/{lev['id']}")
    assert page.status_code == 200 and len(page.text) < 400_000, len(page.text)
    partial = c.get("/partials/imports")
    assert partial.status_code == 200 and len(partial.text) < 100_000, len(partial.text)
    assert "and 71 more" in html.unescape(partial.text)  # 121 failed links: the first 50 are listed
