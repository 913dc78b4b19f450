"""Tags over REST and MCP on the live server: an item's tags (replace, add, remove), names in their one form and
case-insensitive per user, nested ones, the caller's tag list with counts, rename (a merge onto an existing tag)
and delete with the tags nested in them, tags given with an ingest; scopes (a folder token sees and sets tags only on
the items it sees), a shared folder's members seeing the owner's tags read-only, item.updated signed and valid, the
tags imports used to keep in the metadata made real tags by migration 0027; every refusal with its code."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lev.store import db
from tests.fixtures_feeds import WebhookReceiver
from tests.mcp.test_mcp import call
from tests.sharing.test_sharing_api import share
from tests.sites import Site
from tests.stack import ROOT, Admin, User, make_item, new_user
from tests.webhooks.test_webhooks import add_hook, check, of_type


def ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def err(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == code and body.get("message"), body
    return str(body["message"])


def note(c: httpx.Client, text: str, **extra: Any) -> str:
    return str(ok(c.post("/api/v1/ingest", json={"kind": "text", "text": text, **extra}))["user_item_id"])


def tags_of(c: httpx.Client, item_id: str) -> list[str]:
    return list(ok(c.get(f"/api/v1/items/{item_id}"))["tags"])


def listed(c: httpx.Client) -> dict[str, int]:
    return {t["name"]: t["count"] for t in ok(c.get("/api/v1/tags"))["tags"]}


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def test_an_items_tags_in_their_one_form_case_insensitive_and_nested(api, user: User) -> None:
    c = api(user.token(write=True))
    item = note(c, "Acme's quarterly numbers, as the client sent them.",
                tags=["Work/Clients/Acme", "  #reading ", "work", "WORK/clients//acme", "reading"])
    # one tag per key, in key order, each spelled as it was first given; `//`, `#` and white space are not kept
    assert tags_of(c, item) == ["reading", "work", "Work/Clients/Acme"]
    page = ok(c.get("/api/v1/items"))["items"]
    assert [i["tags"] for i in page if i["id"] == item] == [["reading", "work", "Work/Clients/Acme"]]
    assert listed(c) == {"reading": 1, "work": 1, "Work/Clients/Acme": 1}

    # a spelling the user has already is that tag (its first spelling stays)
    assert ok(c.post(f"/api/v1/items/{item}/tags", json={"tags": ["READING", "new one"]})) == {
        "item_id": item, "tags": ["new one", "reading", "work", "Work/Clients/Acme"]}
    other = note(c, "A second note about Acme.", tags=["work/CLIENTS/acme"])
    assert tags_of(c, other) == ["Work/Clients/Acme"]
    assert listed(c)["Work/Clients/Acme"] == 2

    assert ok(c.put(f"/api/v1/items/{item}/tags", json={"tags": ["only"]}))["tags"] == ["only"]
    assert listed(c) == {"only": 1, "Work/Clients/Acme": 1}  # tags no item carries are not listed
    # a nested name in the path, percent-encoded or not
    assert ok(c.post(f"/api/v1/items/{item}/tags", json={"tags": ["a/b", "a"]}))["tags"] == ["a", "a/b", "only"]
    assert ok(c.delete(f"/api/v1/items/{item}/tags/A%2FB"))["tags"] == ["a", "only"]
    ok(c.post(f"/api/v1/items/{item}/tags", json={"tags": ["a/b"]}))
    assert ok(c.delete(f"/api/v1/items/{item}/tags/a"))["tags"] == ["a/b", "only"]  # the nested one stays
    assert ok(c.delete(f"/api/v1/items/{item}/tags/a/b"))["tags"] == ["only"]
    err(c.delete(f"/api/v1/items/{item}/tags/a"), 404, "not_found")
    assert ok(c.put(f"/api/v1/items/{item}/tags", json={"tags": []}))["tags"] == []


def test_bad_tags_are_refused_and_change_nothing(api, user: User) -> None:
    c = api(user.token(write=True))
    item = note(c, "Nothing but a note.", tags=["keep"])
    for bad in (["x" * 65], ["  "], ["#/"], ["tab\x01"], "keep", [7], [f"t{i}" for i in range(101)]):
        err(c.put(f"/api/v1/items/{item}/tags", json={"tags": bad}), 400, "invalid_body")
        err(c.post(f"/api/v1/items/{item}/tags", json={"tags": bad}), 400, "invalid_body")
    err(c.put(f"/api/v1/items/{item}/tags", json={}), 400, "invalid_body")
    err(c.put(f"/api/v1/items/{item}/tags", json={"tags": ["a"], "more": 1}), 400, "invalid_body")
    err(c.post("/api/v1/ingest", json={"kind": "text", "text": "x", "tags": ["y" * 65]}), 400, "invalid_body")
    ok(c.put(f"/api/v1/items/{item}/tags", json={"tags": [f"t{i}" for i in range(60)]}))
    message = err(c.post(f"/api/v1/items/{item}/tags", json={"tags": [f"u{i}" for i in range(41)]}), 400,
                  "invalid_body")
    assert "100" in message
    assert len(tags_of(c, item)) == 60
    err(c.put("/api/v1/items/not-a-uuid/tags", json={"tags": ["a"]}), 400, "invalid_id")
    err(c.put("/api/v1/items/00000000-0000-4000-8000-000000000000/tags", json={"tags": ["a"]}), 404, "not_found")
    err(c.delete(f"/api/v1/items/{item}/tags/" + "z" * 65), 400, "invalid_body")
    reader = api(user.token())
    err(reader.put(f"/api/v1/items/{item}/tags", json={"tags": ["a"]}), 403, "capability_denied")
    err(reader.patch("/api/v1/tags/t1", json={"name": "x"}), 403, "capability_denied")
    assert len(tags_of(c, item)) == 60


def test_rename_onto_an_existing_tag_merges_and_delete_takes_nested_tags(api, user: User) -> None:
    c = api(user.token(write=True))
    a = note(c, "Transformers, a paper.", tags=["ml", "Papers"])
    b = note(c, "A survey of learning.", tags=["AI"])
    nested = note(c, "Attention.", tags=["ml/papers/2017"])
    alone = note(c, "Unrelated.", tags=["mlx"])  # shares a prefix, not a parent
    assert listed(c) == {"AI": 1, "ml": 1, "ml/papers/2017": 1, "mlx": 1, "Papers": 1}

    err(c.patch("/api/v1/tags/ml", json={"name": "ml/inner"}), 400, "invalid_body")  # into itself
    err(c.patch("/api/v1/tags/nothing", json={"name": "x"}), 404, "not_found")
    err(c.patch("/api/v1/tags/ml", json={"name": "  "}), 400, "invalid_body")
    err(c.patch("/api/v1/tags/ml", json={"name": "n" * 60 + "/abc"}), 400, "invalid_body")  # nested one: > 64

    renamed = ok(c.patch("/api/v1/tags/ML", json={"name": "ai"}))
    assert renamed == {"name": "ai", "count": 2, "merged": True, "items": 3}
    assert tags_of(c, a) == ["ai", "Papers"] and tags_of(c, b) == ["ai"] and tags_of(c, nested) == ["ai/papers/2017"]
    assert tags_of(c, alone) == ["mlx"]
    assert listed(c) == {"ai": 2, "ai/papers/2017": 1, "mlx": 1, "Papers": 1}
    # a case-only rename renames; the tags nested in it follow
    assert ok(c.patch("/api/v1/tags/ai", json={"name": "AI"}))["merged"] is False
    assert listed(c) == {"AI": 2, "AI/papers/2017": 1, "mlx": 1, "Papers": 1}
    # a nested tag renamed onto a top-level one
    # a tag only its nested tags make (`ai/papers` of `ai/papers/2017`) is renamed through them
    assert ok(c.patch("/api/v1/tags/ai%2Fpapers", json={"name": "papers"}))["merged"] is False
    assert tags_of(c, nested) == ["papers/2017"]

    gone = ok(c.delete("/api/v1/tags/papers"))
    assert gone == {"name": "Papers", "deleted": True, "items": 2}
    assert tags_of(c, a) == ["AI"] and tags_of(c, nested) == []
    err(c.delete("/api/v1/tags/papers"), 404, "not_found")
    assert listed(c) == {"AI": 2, "mlx": 1}


def test_a_folder_token_sees_and_sets_tags_only_on_the_items_it_sees(api, user: User) -> None:
    inside_folder = user.folder("Clients")
    whole = api(user.token(write=True, kb_only=False))
    inside = note(whole, "Inside the folder.", folder_id=inside_folder, tags=["both", "inside-only"])
    outside = note(whole, "Outside the folder.", tags=["both", "secret-project"])
    scoped = api(user.token(write=True, folders=[inside_folder]))

    assert listed(scoped) == {"both": 1, "inside-only": 1}  # counts and names of what it sees only
    assert listed(whole) == {"both": 2, "inside-only": 1, "secret-project": 1}
    assert ok(scoped.post(f"/api/v1/items/{inside}/tags", json={"tags": ["added"]}))["tags"] == [
        "added", "both", "inside-only"]
    for r in (scoped.put(f"/api/v1/items/{outside}/tags", json={"tags": ["x"]}),
              scoped.post(f"/api/v1/items/{outside}/tags", json={"tags": ["x"]}),
              scoped.delete(f"/api/v1/items/{outside}/tags/both"), scoped.get(f"/api/v1/items/{outside}")):
        err(r, 404, "not_found")
    # renaming or deleting a tag reaches every item: a whole-library token's work
    err(scoped.patch("/api/v1/tags/both", json={"name": "x"}), 403, "forbidden_scope")
    err(scoped.delete("/api/v1/tags/both"), 403, "forbidden_scope")
    assert tags_of(whole, outside) == ["both", "secret-project"]


def test_a_shared_folders_members_see_the_owners_tags_read_only(api, admin: Admin) -> None:
    owner, viewer, editor = new_user(admin), new_user(admin), new_user(admin)
    folder = owner.folder("Reading group")
    o = api(owner.token(write=True, kb_only=False))
    v, e = api(viewer.token(write=True, kb_only=False)), api(editor.token(write=True, kb_only=False))
    share(o, folder, viewer, v, "viewer")
    share(o, folder, editor, e, "editor")
    theirs = note(o, "The owner's notes on the book.", folder_id=folder, tags=["book-club"])
    mine = note(v, "The viewer's own note.", tags=["book-club", "private"])

    assert tags_of(v, theirs) == ["book-club"] and tags_of(e, theirs) == ["book-club"]
    for c in (v, e):
        for r in (c.put(f"/api/v1/items/{theirs}/tags", json={"tags": ["mine"]}),
                  c.post(f"/api/v1/items/{theirs}/tags", json={"tags": ["mine"]}),
                  c.delete(f"/api/v1/items/{theirs}/tags/book-club")):
            err(r, 403, "forbidden_scope")
    assert tags_of(o, theirs) == ["book-club"]
    # each user's tags are their own: the viewer's list and renames leave the owner's alone
    assert listed(v) == {"book-club": 1, "private": 1} and listed(o) == {"book-club": 1}
    ok(v.patch("/api/v1/tags/book-club", json={"name": "club"}))
    assert tags_of(v, mine) == ["club", "private"] and tags_of(v, theirs) == ["book-club"]
    assert tags_of(o, theirs) == ["book-club"]


def test_ingest_and_mcp_accept_tags_and_a_shared_page_keeps_each_users_own(api, server, admin: Admin,
                                                                           site: Site) -> None:
    first, second = new_user(admin), new_user(admin)
    a, b = api(first.token(write=True)), api(second.token(write=True))
    url = f"{site.url}/volcano"
    one = ok(a.post("/api/v1/ingest", json={"kind": "url", "url": url, "tags": ["geology"]}))
    two = ok(b.post("/api/v1/ingest", json={"kind": "url", "url": url, "tags": ["Travel/Iceland"]}))
    assert one["content_id"] == two["content_id"]  # one stored page, two users' items and tags
    assert tags_of(a, one["user_item_id"]) == ["geology"] and tags_of(b, two["user_item_id"]) == ["Travel/Iceland"]

    token = first.token(write=True)
    added = call(server, token, "add_to_knowledge", {"text": "Basalt columns form as lava cools.",
                                                     "tags": ["geology", "Field notes"]})["result"]
    assert not added.get("isError"), added
    item_id = added["structuredContent"]["item_id"]
    got = call(server, token, "get_item", {"item_id": item_id})["result"]["structuredContent"]
    assert got["tags"] == ["Field notes", "geology"] and got["read_at"] is None and got["progress"] == 0
    recent = call(server, token, "list_recent", {"limit": 5})["result"]["structuredContent"]["items"]
    assert recent[0]["id"] == item_id and recent[0]["tags"] == ["Field notes", "geology"]
    bad = call(server, token, "add_to_knowledge", {"text": "x", "tags": ["z" * 65]})
    assert bad["error"]["code"] == -32602, bad
    assert listed(a) == {"Field notes": 1, "geology": 2}


def test_tag_changes_send_a_signed_item_updated(api, user: User) -> None:
    receiver = WebhookReceiver()
    try:
        c = api(user.token(write=True, kb_only=False))
        hook = add_hook(c, receiver.url, ["item.updated"])
        item = note(c, "A note to tag.", tags=["first"])  # tagged as it is made: item.created says it, no update
        ok(c.post(f"/api/v1/items/{item}/tags", json={"tags": ["first"]}))  # nothing changed: no event
        ok(c.post(f"/api/v1/items/{item}/tags", json={"tags": ["second"]}))
        got = receiver.wait_for(of_type("item.updated"))
        body = check(got[0], hook["secret"])
        assert body["data"]["item_id"] == item and body["data"]["changed"] == ["tags"]
        assert body["data"]["tags"] == ["first", "second"] and body["data"]["read_at"] is None
        ok(c.patch("/api/v1/tags/second", json={"name": "renamed"}))
        got = receiver.wait_for(of_type("item.updated", 2))
        assert [check(d, hook["secret"])["data"]["tags"] for d in got] == [["first", "second"], ["first", "renamed"]]
    finally:
        receiver.close()


def test_migration_0027_makes_the_tags_imports_kept_in_the_metadata_real_tags(user: User, api) -> None:
    item = make_item(user, title="Imported long ago")
    user.admin.sql("UPDATE user_items SET metadata = CAST(:m AS jsonb) WHERE id = :i", i=item,
                   m=json.dumps({"tags": ["Old/Tag", "old/tag", "x" * 80, 5, "second"], "note": "kept"}))
    path = ROOT / "lev/store/migrations/versions/0027_tags_reading.py"
    spec = importlib.util.spec_from_file_location("migration_0027", path)
    assert spec is not None and spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)

    async def convert() -> int:
        async with db.database().transaction() as s:
            conn = await s.connection()
            return int(await conn.run_sync(migration.tags_from_metadata))

    assert user.admin.run_coro(convert()) >= 1
    c = api(user.token(kb_only=False))
    got = ok(c.get(f"/api/v1/items/{item}"))
    assert got["tags"] == ["Old/Tag", "second", "x" * 64] and got["metadata"] == {"note": "kept"}
