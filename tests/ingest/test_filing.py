"""A folder-scoped token reaches what it creates: it sees and files its own unfiled items, and ingest (REST and
MCP add_to_knowledge) takes an optional in-scope folder_id."""

from __future__ import annotations

import uuid
from typing import Any

from tests.mcp.test_mcp import call
from tests.stack import User


def ingest(c: Any, **body: Any) -> Any:
    return c.post("/api/v1/ingest", json={"kind": "text", "auto_transform": False, **body})


def test_multi_folder_token_sees_and_files_the_unfiled_items_it_created(server, api, user: User) -> None:
    a1, a2 = user.folder("a1"), user.folder("a2")
    token = user.token(write=True, folders=[a1, a2])
    c = api(token)
    r = ingest(c, text="Notes on tidal locking of moons", title="tidal")
    assert r.status_code == 200, r.text
    made = r.json()
    assert made["folder_id"] is None and made["status"] == "ready"
    item = made["user_item_id"]
    got = c.get(f"/api/v1/items/{item}")
    assert got.status_code == 200 and got.json()["folder_ids"] == [], got.text
    assert item in [i["id"] for i in c.get("/api/v1/items").json()["items"]]
    hits = c.get("/api/v1/search", params={"q": "tidal locking", "mode": "keyword"}).json()["results"]
    assert item in [h["item_id"] for h in hits]
    # MCP: the same token reads it back
    res = call(server, token, "get_item", {"item_id": item})["result"]
    assert res["isError"] is False and res["structuredContent"]["id"] == item
    recent = call(server, token, "list_recent", {"limit": 5})["result"]["structuredContent"]["items"]
    assert item in [i["id"] for i in recent]
    # ... and files it
    r = c.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [a2]})
    assert r.status_code == 200 and r.json() == {"item_id": item, "folder_ids": [a2]}, r.text
    assert c.get(f"/api/v1/items/{item}").json()["folder_ids"] == [a2]


def test_unfiled_items_stay_hidden_from_other_scoped_tokens(server, api, user: User) -> None:
    a1, a2 = user.folder("b1"), user.folder("b2")
    mine, other = user.token(write=True, folders=[a1, a2]), user.token(write=True, folders=[a1, a2])
    item = ingest(api(mine), text="private scratch note").json()["user_item_id"]
    o = api(other)
    assert o.get(f"/api/v1/items/{item}").status_code == 404
    assert o.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [a1]}).status_code == 404
    assert item not in [i["id"] for i in o.get("/api/v1/items").json()["items"]]
    res = call(server, other, "get_item", {"item_id": item})["result"]
    assert res["isError"] is True and "not_found" in res["content"][0]["text"]
    whole = api(user.token())
    assert whole.get(f"/api/v1/items/{item}").status_code == 200


def test_ingest_files_into_an_in_scope_folder_id(server, api, user: User) -> None:
    a1, a2, outside = user.folder("c1"), user.folder("c2"), user.folder("c3")
    token = user.token(write=True, folders=[a1, a2])
    c = api(token)
    r = ingest(c, text="filed at birth", folder_id=a2)
    assert r.status_code == 200 and r.json()["folder_id"] == a2, r.text
    assert c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()["folder_ids"] == [a2]
    res = call(server, token, "add_to_knowledge", {"text": "filed by an agent", "folder_id": a1})["result"]
    assert res["isError"] is False and res["structuredContent"]["folder_id"] == a1, res
    assert c.get(f"/api/v1/items/{res['structuredContent']['user_item_id']}").json()["folder_ids"] == [a1]
    before = api(user.token()).get("/api/v1/items").json()["total"]
    for fid in (outside, str(uuid.uuid4())):  # out of scope, or no such folder: the same 403 (no existence oracle)
        r = ingest(c, text="nope", folder_id=fid)
        assert r.status_code == 403, r.text
        assert r.json() == {"error": "forbidden_scope", "message": r.json()["message"], "out_of_scope": [fid]}
        rpc = call(server, token, "add_to_knowledge", {"text": "nope", "folder_id": fid})
        assert rpc["error"]["code"] == -32605 and rpc["error"]["data"]["error"] == "forbidden_scope", rpc
    assert api(user.token()).get("/api/v1/items").json()["total"] == before


def test_folder_id_with_whole_library_and_one_folder_tokens(server, api, user: User) -> None:
    f, g = user.folder("d1"), user.folder("d2")
    whole = api(user.token(write=True))
    r = ingest(whole, text="whole library, filed", folder_id=g)
    assert r.status_code == 200 and r.json()["folder_id"] == g, r.text
    missing = str(uuid.uuid4())
    r = ingest(whole, text="no such folder", folder_id=missing)
    assert r.status_code == 404, r.text
    assert r.json() == {"error": "folder_not_found", "message": r.json()["message"], "missing": [missing]}
    r = ingest(whole, text="bad id", folder_id="not-a-uuid")
    assert r.status_code == 400 and r.json()["error"] == "invalid_body", r.text
    one = api(user.token(write=True, folders=[f]))
    assert ingest(one, text="own folder named", folder_id=f).json()["folder_id"] == f
    r = ingest(one, text="other folder", folder_id=g)
    assert r.status_code == 403 and r.json()["error"] == "forbidden_scope", r.text
    rpc = call(server, user.token(write=True), "add_to_knowledge", {"text": "x", "folder_id": "nope"})
    assert rpc["error"]["code"] == -32602, rpc
