"""Archived copies on the live server: a fetched page and a captured one each get a copy a few seconds after they are
saved; GET /api/v1/items/{id}/archive serves it sandboxed (the exact Content-Security-Policy, nosniff) or as a
download, to callers that can see the item only; it stays readable after its site answers 404; it is counted in the
export and in what a backup copies; deleting the item queues the copy's object for deletion."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lev.store import db, maintenance
from tests.archive.resources import PNG, ResourceSite, hostile_site
from tests.library.test_export import export
from tests.stack import Admin, User
from tests.tags.test_tags_api import err, note, ok

POLICY = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline' data:"


@pytest.fixture
def sites() -> Iterator[tuple[ResourceSite, ResourceSite]]:
    with ResourceSite() as site, ResourceSite() as beacon:
        yield site, beacon


def archived(c: httpx.Client, item_id: str, timeout: float = 120) -> dict[str, Any]:
    """The item's `archive` once it is no longer pending (the worker's job)."""
    deadline = time.monotonic() + timeout
    while True:
        copy = ok(c.get(f"/api/v1/items/{item_id}"))["archive"]
        if copy is not None and copy["status"] != "pending":
            return dict(copy)
        assert time.monotonic() < deadline, copy
        time.sleep(0.3)


def test_a_fetched_page_keeps_a_sandboxed_copy_that_outlives_its_site(api, user: User, sites) -> None:
    site, beacon = sites
    url = hostile_site(site, beacon)
    c = api(user.token(write=True))
    saved = ok(c.post("/api/v1/ingest", json={"kind": "url", "url": url, "tags": ["shore"]}))
    item = saved["user_item_id"]
    copy = archived(c, item)
    assert copy["status"] == "ready" and copy["resources"] == 4 and copy["skipped"] >= 1, copy
    assert copy["saved_at"] and 1000 < copy["size_bytes"] < 200_000 and copy["error"] is None

    r = c.get(f"/api/v1/items/{item}/archive")
    assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.headers["content-security-policy"] == POLICY and r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-disposition"].startswith("inline;") and "set-cookie" not in r.headers
    assert len(r.content) == copy["size_bytes"] and "<script" not in r.text.lower()
    assert "Anemones, hermit crabs" in r.text and "data:image/png;base64," in r.text
    file = c.get(f"/api/v1/items/{item}/archive", params={"download": "true"})
    assert file.headers["content-disposition"].startswith("attachment;") and file.content == r.content
    assert file.headers["content-security-policy"] == POLICY

    site.add("/hostile", b"<html><body>Gone</body></html>", status=404)  # the site forgets the page
    again = c.get(f"/api/v1/items/{item}/archive")
    assert again.status_code == 200 and again.content == r.content
    assert "ochre sea star" in ok(c.get(f"/api/v1/items/{item}"))["text"]
    site.close()  # and then stops answering at all
    assert c.get(f"/api/v1/items/{item}/archive").content == r.content

    lines = export(api(user.token(kb_only=False)))
    line = next(x for x in lines if x["type"] == "item" and x["id"] == item)
    assert line["archive"] == {"saved_at": copy["saved_at"], "size_bytes": copy["size_bytes"],
                               "url": f"/api/v1/items/{item}/archive"} and line["tags"] == ["shore"]
    assert lines[-1]["archives"] >= 1 and lines[-1]["archive_bytes"] >= copy["size_bytes"]


def test_a_captured_page_gets_its_copy_and_only_callers_who_see_the_item_read_it(api, user: User, sites,
                                                                               admin: Admin, data_dir: Path) -> None:
    site, _ = sites
    site.add("/shell.png", PNG, "image/png")
    folder, other = user.folder("Captures"), user.folder("Elsewhere")
    c = api(user.token(write=True, kb_only=False))
    html = ("<html><head><title>Night market</title></head><body><article><h1>Lanterns of the night market</h1>"
            "<p>Paper lanterns glow above the night market stalls, where vendors fry scallion pancakes and grill "
            "skewers of squid over charcoal until long after midnight.</p><img src='/shell.png' alt='lantern'>"
            "<script>document.title='ran'</script></article></body></html>")
    item = ok(c.post("/api/v1/ingest", json={"kind": "page", "url": f"{site.url}/market", "html": html,
                                             "folder_id": folder}))["user_item_id"]
    copy = archived(c, item)
    assert copy["status"] == "ready" and copy["resources"] == 1
    body = ok_text(c.get(f"/api/v1/items/{item}/archive"))
    assert "Lanterns of the night market" in body and "<script" not in body and "data:image/png;base64," in body

    inside, outside = api(user.token(folders=[folder])), api(user.token(folders=[other]))
    assert inside.get(f"/api/v1/items/{item}/archive").status_code == 200
    err(outside.get(f"/api/v1/items/{item}/archive"), 404, "not_found")
    plain = note(c, "A note has no page to archive.")
    assert ok(c.get(f"/api/v1/items/{plain}"))["archive"] is None
    err(c.get(f"/api/v1/items/{plain}/archive"), 404, "not_found")
    err(c.get("/api/v1/items/not-an-id/archive"), 400, "invalid_id")

    async def copied() -> tuple[list[str], dict[str, int]]:
        async with maintenance.exported_snapshot(db.database()) as snap:
            return snap.object_paths, snap.archives

    path = admin.sql("SELECT a.object_path FROM archives a JOIN user_items u ON u.content_id = a.content_id"
                     " WHERE u.id = :i", i=item)[0][0]
    paths, counted = admin.run_coro(copied())
    assert path in paths and counted["count"] >= 1 and counted["bytes"] >= copy["size_bytes"]

    ok(c.delete(f"/api/v1/items/{item}"))
    assert admin.sql("SELECT 1 FROM archives a JOIN user_items u ON u.content_id = a.content_id WHERE u.id = :i",
                     i=item) == []
    queued = admin.sql("SELECT 1 FROM object_deletions WHERE path = :p", p=path)
    gone = not (data_dir / "objects" / path).exists()
    assert queued or gone  # queued by the trigger, or already drained


def ok_text(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    return r.text
