"""Shared folders with the automation and capture of other issues: an item added to a shared folder tells only its
adder's webhooks; a feed fills a shared folder only when its follower is the owner or an editor (a member made a
viewer or removed takes their feed with them); a page captured in one member's browser stays theirs until they
file it into the shared folder."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures_feeds import FeedEntry, FeedSite, WebhookReceiver
from tests.sharing.test_sharing_api import err, found, note, ok, share
from tests.sites import article_html
from tests.stack import Admin, new_user


@pytest.fixture
def receivers() -> Iterator[tuple[WebhookReceiver, WebhookReceiver]]:
    a, b = WebhookReceiver(), WebhookReceiver()
    yield a, b
    a.close()
    b.close()


@pytest.fixture(scope="module")
def feeds() -> Iterator[FeedSite]:
    s = FeedSite()
    yield s
    s.close()


def hook(c: Any, url: str) -> None:
    ok(c.post("/api/v1/webhooks", json={"url": url, "events": ["item.created", "item.ready"]}), 201)


def items_of(receiver: WebhookReceiver) -> set[str]:
    return {json.loads(d.body)["data"].get("item_id") for d in receiver.deliveries}


def test_an_item_added_to_a_shared_folder_tells_its_adder_only(api, admin: Admin,
                                                                receivers: tuple[WebhookReceiver, ...]) -> None:
    owner, editor = new_user(admin), new_user(admin)
    folder = owner.folder("Hooked together")
    o, e = api(owner.token(write=True, kb_only=False)), api(editor.token(write=True, kb_only=False))
    share(o, folder, editor, e, "editor")
    owners, editors = receivers
    hook(o, owners.url)
    hook(e, editors.url)
    added = note(e, "An editor's note about puffins.", "Puffins", folder)
    got = editors.wait_for(lambda ds: sum(1 for d in ds if added.encode() in d.body) == 2)
    assert {json.loads(d.body)["type"] for d in got} == {"item.created", "item.ready"}
    ready = next(json.loads(d.body) for d in got if b"item.ready" in d.body)
    assert ready["data"]["folder_ids"] == [folder]
    mine = note(o, "The owner's own note about puffins.", "Owner puffins", folder)
    owners.wait_for(lambda ds: sum(1 for d in ds if mine.encode() in d.body) == 2)
    assert added not in items_of(owners)  # the owner's endpoints heard of their own item only
    assert mine not in items_of(editors)


def test_a_feed_fills_a_shared_folder_only_for_its_owner_and_editors(api, admin: Admin, feeds: FeedSite) -> None:
    owner, editor, viewer = new_user(admin), new_user(admin), new_user(admin)
    folder = owner.folder("Fed together")
    o = api(owner.token(write=True, kb_only=False))
    e, v = api(editor.token(write=True, kb_only=False)), api(viewer.token(write=True, kb_only=False))
    share(o, folder, editor, e, "editor")
    share(o, folder, viewer, v, "viewer")
    feeds.add("shared", "rss", [FeedEntry(n, guid=f"shared-{n}") for n in (202, 201)], title="Shared news")
    err(v.post("/api/v1/feeds", json={"url": f"{feeds.url}/feeds/shared", "folder_id": folder}), 403,
        "forbidden_scope")
    own_feed = ok(v.post("/api/v1/feeds", json={"url": f"{feeds.url}/feeds/shared"}), 201)
    err(v.patch(f"/api/v1/feeds/{own_feed['id']}", json={"folder_id": folder}), 403, "forbidden_scope")
    feed = ok(e.post("/api/v1/feeds", json={"url": f"{feeds.url}/feeds/shared", "folder_id": folder}), 201)
    deadline = time.monotonic() + 120
    while len(ok(o.get("/api/v1/items", params={"folder_id": folder}))["items"]) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    urls = sorted(i["url"] for i in ok(o.get("/api/v1/items", params={"folder_id": folder}))["items"])
    assert urls == [f"{feeds.url}/a/201", f"{feeds.url}/a/202"]  # the editor's items, seen by the owner
    ok(o.patch(f"/api/v1/folders/{folder}/members/{editor.id}", json={"role": "viewer"}))
    assert ok(e.get(f"/api/v1/feeds/{feed['id']}"))["folder_id"] is None  # it fills the editor's library now
    err(e.patch(f"/api/v1/feeds/{feed['id']}", json={"folder_id": folder}), 403, "forbidden_scope")


def test_a_capture_stays_private_until_filed_into_the_shared_folder(api, admin: Admin) -> None:
    owner, member = new_user(admin), new_user(admin)
    folder = owner.folder("Captured together")
    o, m = api(owner.token(write=True, kb_only=False)), api(member.token(write=True, kb_only=False))
    share(o, folder, member, m, "editor")
    html = article_html("Members only: kestrels", ["Kestrels hover in place while hunting voles over the verge."])
    r = ok(m.post("/api/v1/ingest", json={"kind": "page", "url": "https://paywalled.example/kestrels",
                                          "html": html.decode(), "auto_transform": False}))
    item = r["user_item_id"]
    assert found(m, "kestrels") == {item}
    assert found(o, "kestrels") == set()
    err(o.get(f"/api/v1/items/{item}"), 404, "not_found")
    ok(m.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [folder]}))
    assert found(o, "kestrels") == {item}
    assert "hover in place" in ok(o.get(f"/api/v1/items/{item}"))["text"]
    ok(m.delete(f"/api/v1/items/{item}/folders/{folder}"))
    assert found(o, "kestrels") == set()  # out of the folder: private again
    note(m, "unrelated", "unrelated")  # the member's other items never show
    assert {i["title"] for i in ok(o.get("/api/v1/items"))["items"]} == set()


def test_a_viewers_capture_never_overwrites_the_owners_item(api, admin: Admin) -> None:
    """Issue 47 item 3, the exact sequence: Bob (editor) captures U into Alice's folder; Alice removes Bob (the
    hand-over gives her an item on Bob's capture); Bob deletes his own item; Alice re-invites him as a viewer; Bob
    captures U again. It used to answer with Alice's item id, her title and text replaced, her highlight gone."""
    alice, bob = new_user(admin), new_user(admin)
    folder = alice.folder("Birds")
    a, b = api(alice.token(write=True, kb_only=False)), api(bob.token(write=True, kb_only=False))
    share(a, folder, bob, b, "editor")
    url = "https://paywalled.example/owls"
    first = article_html("Owls at dusk", ["Tawny owls call at dusk from the old oak by the river."]).decode()
    bobs = ok(b.post("/api/v1/ingest", json={"kind": "page", "url": url, "html": first, "folder_id": folder,
                                             "auto_transform": False}))["user_item_id"]
    ok(a.delete(f"/api/v1/folders/{folder}/members/{bob.id}"), 204)
    alices = [i for i in ok(a.get("/api/v1/items", params={"folder_id": folder}))["items"]]
    assert len(alices) == 1 and alices[0]["id"] != bobs
    alices_id = alices[0]["id"]
    mark = ok(a.post(f"/api/v1/items/{alices_id}/highlights", json={"text": "Tawny owls call at dusk"}), 201)
    assert ok(b.delete(f"/api/v1/items/{bobs}"))["deleted"] is True
    share(a, folder, bob, b, "viewer")

    second = article_html("Rewritten", ["Something else entirely replaced the owls."]).decode()
    again = ok(b.post("/api/v1/ingest", json={"kind": "page", "url": url, "html": second, "auto_transform": False}))
    assert again["user_item_id"] != alices_id  # Bob's own new item
    kept = ok(a.get(f"/api/v1/items/{alices_id}"))
    assert kept["title"] == "Owls at dusk" and "Tawny owls call at dusk" in kept["text"]
    assert [h["id"] for h in ok(a.get(f"/api/v1/items/{alices_id}/highlights"))["highlights"]] == [mark["id"]]
    mine = ok(b.get(f"/api/v1/items/{again['user_item_id']}"))
    assert "replaced the owls" in mine["text"] and mine["folder_ids"] == []  # a viewer files nothing into it
    assert admin.sql("SELECT user_id FROM user_items WHERE id = :i", i=again["user_item_id"])[0][0] == bob.id
