"""REST management surface over HTTP against the live server: folders, items, memberships, auth, errors."""

from __future__ import annotations

import importlib
import re
import uuid

import yaml
from openapi_spec_validator import validate

from lev.core.contract import SPEC_PATH, handler_name, operations
from tests.stack import make_item

ERROR_BODY_KEYS = {"error"}


def err(resp, status: int, code: str) -> dict:  # type: ignore[no-untyped-def]
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert body["error"] == code, body
    assert resp.headers.get("x-request-id")
    return body


# --- the contract document -------------------------------------------------------------------------------

def test_openapi_served_is_31_and_valid(server, api) -> None:
    r = api(None).get("/api/v1/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    validate(doc)
    assert doc == yaml.safe_load(SPEC_PATH.read_text())


def test_every_operation_id_imports() -> None:
    for op_id, op in operations().items():
        assert re.fullmatch(r"[a-z][A-Za-z]+", op_id), op_id  # a clean name a generated client can use
        module, func = handler_name(op["operation"]).rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), func)), op_id


# --- authentication --------------------------------------------------------------------------------------

def test_missing_and_malformed_bearer(server, api) -> None:
    r = api(None).get("/api/v1/folders")
    err(r, 401, "missing_bearer_token")
    assert r.headers["www-authenticate"].lower().startswith("bearer")
    r = api(None).get("/api/v1/folders", headers={"Authorization": "Basic dXNlcjpwYXNz"})
    err(r, 401, "missing_bearer_token")


def test_unknown_revoked_expired_tokens_are_invalid(server, api, user, admin) -> None:
    err(api("lev_" + "x" * 43).get("/api/v1/folders"), 401, "invalid_token")
    err(api("not-a-lev-token").get("/api/v1/folders"), 401, "invalid_token")
    tok = user.token()
    assert api(tok).get("/api/v1/folders").status_code == 200
    token_id = admin.sql("SELECT id FROM tokens WHERE user_id = :u", u=user.id)[0][0]
    admin.sql("UPDATE tokens SET revoked_at = now() WHERE id = :t", t=token_id)
    body = err(api(tok).get("/api/v1/folders"), 401, "invalid_token")
    expired = user.token(name="exp")
    admin.sql("UPDATE tokens SET expires_at = now() - interval '1 second' WHERE name = 'exp' AND user_id = :u",
              u=user.id)
    body2 = err(api(expired).get("/api/v1/folders"), 401, "invalid_token")
    assert body == body2  # nothing says which check failed


def test_token_stored_as_hash_only(user, admin) -> None:
    tok = user.token()
    assert tok.startswith("lev_") and len(tok) >= 4 + 32
    rows = admin.sql("SELECT token_hash, prefix FROM tokens WHERE user_id = :u", u=user.id)
    import hashlib

    assert bytes(rows[0][0]) == hashlib.sha256(tok.encode()).digest()
    assert tok not in repr(rows)[20:] or rows[0][1] == tok[:12]


# --- folders ---------------------------------------------------------------------------------------------

def test_folder_create_list_and_name_rules(server, api, user) -> None:
    c = api(user.token(write=True))
    r = c.post("/api/v1/folders", json={"name": "  Papers  "})
    assert r.status_code == 201, r.text
    folder = r.json()
    assert folder["name"] == "Papers" and folder["item_count"] == 0
    uuid.UUID(folder["id"])
    err(c.post("/api/v1/folders", json={"name": "PAPERS"}), 409, "name_taken")
    err(c.post("/api/v1/folders", json={"name": "   "}), 400, "invalid_body")
    err(c.post("/api/v1/folders", json={"name": ""}), 400, "invalid_body")
    err(c.post("/api/v1/folders", json={"name": "x" * 201}), 400, "invalid_body")
    err(c.post("/api/v1/folders", json={}), 400, "invalid_body")
    err(c.post("/api/v1/folders", json={"name": "a", "extra": 1}), 400, "invalid_body")
    r = c.post("/api/v1/folders", content=b"{not json", headers={"content-type": "application/json"})
    err(r, 400, "invalid_body")
    names = [f["name"] for f in c.get("/api/v1/folders").json()["folders"]]
    assert names == ["Papers"]


def test_folder_create_needs_write_and_whole_library(server, api, user) -> None:
    f = user.folder("F")
    body = err(api(user.token()).post("/api/v1/folders", json={"name": "n"}), 403, "capability_denied")
    assert body["required"] == "write" and body["have"] == ["read"]
    err(api(user.token(write=True, folders=[f])).post("/api/v1/folders", json={"name": "n"}), 403,
        "forbidden_scope")


def test_folder_list_scope_and_item_count(server, api, user, admin) -> None:
    a, b, c_ = user.folder("A"), user.folder("B"), user.folder("C")
    make_item(user, folders=[a])
    make_item(user, folders=[a, b])
    make_item(user, folders=[a], in_kb=False)
    listed = api(user.token(kb_only=False)).get("/api/v1/folders").json()["folders"]
    whole = {f["name"]: f["item_count"] for f in listed}
    assert whole == {"A": 3, "B": 1, "C": 0}
    kb = {f["name"]: f["item_count"] for f in api(user.token()).get("/api/v1/folders").json()["folders"]}
    assert kb == {"A": 2, "B": 1, "C": 0}
    scoped = api(user.token(folders=[b, c_])).get("/api/v1/folders").json()["folders"]
    assert sorted(f["name"] for f in scoped) == ["B", "C"]


def test_folder_delete_keeps_items_by_default(server, api, user) -> None:
    f = user.folder("Keep")
    item = make_item(user, folders=[f])
    c = api(user.token(write=True))
    r = c.delete(f"/api/v1/folders/{f}")
    assert r.status_code == 200
    assert r.json() == {"id": f, "deleted": True, "items_deleted": 0}
    got = c.get(f"/api/v1/items/{item}").json()
    assert got["folder_ids"] == []
    err(c.delete(f"/api/v1/folders/{f}"), 404, "not_found")


def test_folder_delete_cascade_only_deletes_items_whose_only_folder_it_is(server, api, user) -> None:
    f, g = user.folder("Gone"), user.folder("Stays")
    only_here = make_item(user, folders=[f])
    also_there = make_item(user, folders=[f, g])
    unfiled = make_item(user)
    c = api(user.token(write=True))
    r = c.delete(f"/api/v1/folders/{f}", params={"cascade_items": "true"})
    assert r.json() == {"id": f, "deleted": True, "items_deleted": 1}
    err(c.get(f"/api/v1/items/{only_here}"), 404, "not_found")
    assert c.get(f"/api/v1/items/{also_there}").json()["folder_ids"] == [g]
    assert c.get(f"/api/v1/items/{unfiled}").status_code == 200


def test_folder_delete_errors(server, api, user, admin) -> None:
    from tests.stack import new_user

    f = user.folder("Mine")
    other = new_user(admin)
    theirs = other.folder("Theirs")
    c = api(user.token(write=True))
    err(c.delete("/api/v1/folders/not-a-uuid"), 400, "invalid_id")
    err(c.delete(f"/api/v1/folders/{uuid.uuid4()}"), 404, "not_found")
    err(c.delete(f"/api/v1/folders/{theirs}"), 404, "not_found")
    err(api(user.token()).delete(f"/api/v1/folders/{f}"), 403, "capability_denied")
    err(api(user.token(write=True, folders=[f])).delete(f"/api/v1/folders/{f}"), 403, "forbidden_scope")
    assert api(other.token()).get("/api/v1/folders").json()["folders"][0]["id"] == theirs


def test_deleting_last_in_scope_folder_revokes_scoped_token(server, api, user) -> None:
    a, b = user.folder("One"), user.folder("Two")
    single = user.token(folders=[a])
    double = user.token(folders=[a, b])
    whole = api(user.token(write=True))
    assert whole.delete(f"/api/v1/folders/{a}").status_code == 200
    err(api(single).get("/api/v1/folders"), 401, "invalid_token")
    assert [f["id"] for f in api(double).get("/api/v1/folders").json()["folders"]] == [b]


# --- items -----------------------------------------------------------------------------------------------

def test_item_list_pagination_filters_and_total(server, api, user) -> None:
    f = user.folder("P")
    ids = [make_item(user, folders=[f] if i % 2 else [], title=f"i{i}") for i in range(7)]
    make_item(user, archived=True, title="arch")
    make_item(user, in_kb=False, title="inert")
    c = api(user.token(kb_only=False))
    r = c.get("/api/v1/items", params={"per_page": 3, "page": 1}).json()
    assert r["total"] == 9 and len(r["items"]) == 3 and r["page"] == 1 and r["per_page"] == 3
    seen = []
    for page in (1, 2, 3):
        seen += [i["id"] for i in c.get("/api/v1/items", params={"per_page": 3, "page": page}).json()["items"]]
    assert len(set(seen)) == 9 and set(ids) <= set(seen)
    past = c.get("/api/v1/items", params={"per_page": 3, "page": 5}).json()  # past the end: no rows, same total
    assert past["items"] == [] and past["total"] == 9
    assert c.get("/api/v1/items", params={"folder_id": f}).json()["total"] == 3
    assert c.get("/api/v1/items", params={"archived": "true"}).json()["total"] == 1
    assert c.get("/api/v1/items", params={"in_kb": "false"}).json()["total"] == 1
    assert all("url" in i for i in r["items"])
    err(c.get("/api/v1/items", params={"per_page": 101}), 400, "invalid_body")
    err(c.get("/api/v1/items", params={"page": 0}), 400, "invalid_body")
    err(c.get("/api/v1/items", params={"folder_id": "nope"}), 400, "invalid_body")
    err(c.get("/api/v1/items", params={"folder_id": str(uuid.uuid4())}), 404, "not_found")


def test_item_visibility_by_scope_kb_only_and_owner(server, api, user, admin) -> None:
    from tests.stack import new_user

    a, b = user.folder("A"), user.folder("B")
    in_a = make_item(user, folders=[a])
    in_b = make_item(user, folders=[b])
    unfiled = make_item(user)
    inert = make_item(user, folders=[a], in_kb=False)
    other = new_user(admin)
    foreign = make_item(other)

    def visible(tok: str) -> set[str]:
        c = api(tok)
        listed = {i["id"] for i in c.get("/api/v1/items", params={"per_page": 100}).json()["items"]}
        gettable = {i for i in (in_a, in_b, unfiled, inert, foreign) if c.get(f"/api/v1/items/{i}").status_code == 200}
        assert listed == gettable
        return listed

    assert visible(user.token()) == {in_a, in_b, unfiled}
    assert visible(user.token(kb_only=False)) == {in_a, in_b, unfiled, inert}
    assert visible(user.token(folders=[a])) == {in_a}
    assert visible(user.token(folders=[a], kb_only=False)) == {in_a, inert}
    assert visible(user.token(folders=[a, b])) == {in_a, in_b}
    assert visible(other.token()) == {foreign}
    err(api(user.token(folders=[a])).get("/api/v1/items", params={"folder_id": b}), 404, "not_found")


def test_item_get_full_shape(server, api, user) -> None:
    f = user.folder("Shape")
    item = make_item(user, folders=[f], title="Full", url="https://example.com/a")
    r = api(user.token()).get(f"/api/v1/items/{item}")
    assert r.status_code == 200
    body = r.json()
    for key in ("metadata", "transcript", "outputs", "folders", "transcription_status", "status", "in_kb", "url"):
        assert key in body
    assert body["folders"] == [f] and body["url"] == "https://example.com/a" and body["title"] == "Full"
    assert body["transcription_status"] == "not_required" and body["status"] == "ready"
    err(api(user.token()).get("/api/v1/items/123"), 400, "invalid_id")
    err(api(user.token()).get(f"/api/v1/items/{uuid.uuid4()}"), 404, "not_found")


def test_item_delete_and_content_cleanup(server, api, user, admin) -> None:
    from tests.stack import new_user

    shared = str(uuid.uuid4())
    admin.sql("INSERT INTO contents (id, kind, canonical_url, object_path) VALUES (:id, 'url', :u, :p)",
              id=shared, u=f"https://ex.com/{shared}", p=f"uploads/{shared}")
    other = new_user(admin)
    mine = make_item(user, content_id=shared)
    theirs = make_item(other, content_id=shared)
    err(api(user.token()).delete(f"/api/v1/items/{mine}"), 403, "capability_denied")
    err(api(other.token(write=True)).delete(f"/api/v1/items/{mine}"), 404, "not_found")
    c = api(user.token(write=True))
    r = c.delete(f"/api/v1/items/{mine}")
    assert r.status_code == 200 and r.json() == {"id": mine, "deleted": True}
    err(c.delete(f"/api/v1/items/{mine}"), 404, "not_found")
    assert admin.sql("SELECT count(*) FROM contents WHERE id = :c", c=shared)[0][0] == 1
    assert api(other.token(write=True)).delete(f"/api/v1/items/{theirs}").status_code == 200
    assert admin.sql("SELECT count(*) FROM contents WHERE id = :c", c=shared)[0][0] == 0
    assert admin.sql("SELECT count(*) FROM object_deletions WHERE path = :p", p=f"uploads/{shared}")[0][0] == 1


def test_bulk_delete(server, api, user) -> None:
    a = user.folder("Bulk")
    ids = [make_item(user, folders=[a]) for _ in range(3)]
    outside = make_item(user)
    missing = str(uuid.uuid4())
    c = api(user.token(write=True, folders=[a]))
    r = c.post("/api/v1/items/bulk-delete", json={"ids": [*ids, outside, missing]})
    assert r.status_code == 200, r.text
    assert sorted(r.json()["deleted"]) == sorted(ids)
    assert sorted(r.json()["not_found"]) == sorted([outside, missing])
    err(c.post("/api/v1/items/bulk-delete", json={"ids": []}), 400, "invalid_body")
    err(c.post("/api/v1/items/bulk-delete", json={"ids": [missing] * 101}), 400, "invalid_body")
    err(api(user.token(folders=[a])).post("/api/v1/items/bulk-delete", json={"ids": [missing]}), 403,
        "capability_denied")
    assert api(user.token()).get(f"/api/v1/items/{outside}").status_code == 200


def test_membership_add_rules(server, api, user, admin) -> None:
    from tests.stack import new_user

    a, b, c_ = user.folder("A"), user.folder("B"), user.folder("C")
    item = make_item(user, folders=[a])
    whole = api(user.token(write=True))
    r = whole.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [b, c_]})
    assert r.status_code == 200 and r.json() == {"item_id": item, "folder_ids": sorted([a, b, c_])}
    assert whole.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [b]}).json()["folder_ids"] == sorted(
        [a, b, c_])
    err(api(user.token(write=True, folders=[a])).post(f"/api/v1/items/{item}/folders", json={"folder_ids": [a]}),
        403, "forbidden_scope")
    two = api(user.token(write=True, folders=[a, b]))
    body = err(two.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [b, c_]}), 403, "forbidden_scope")
    assert body["out_of_scope"] == [c_]
    assert two.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [b]}).json()["folder_ids"] == sorted([a, b])
    ghost = str(uuid.uuid4())
    theirs = new_user(admin).folder("T")
    body = err(whole.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [ghost, theirs]}), 404,
               "folder_not_found")
    assert sorted(body["missing"]) == sorted([ghost, theirs])
    err(whole.post(f"/api/v1/items/{uuid.uuid4()}/folders", json={"folder_ids": [a]}), 404, "not_found")
    err(whole.post(f"/api/v1/items/{item}/folders", json={"folder_ids": []}), 400, "invalid_body")
    err(whole.post(f"/api/v1/items/{item}/folders", json={"folder_ids": ["zz"]}), 400, "invalid_body")
    err(api(user.token()).post(f"/api/v1/items/{item}/folders", json={"folder_ids": [b]}), 403, "capability_denied")


def test_membership_remove(server, api, user) -> None:
    a, b = user.folder("A"), user.folder("B")
    item = make_item(user, folders=[a, b])
    c = api(user.token(write=True))
    r = c.delete(f"/api/v1/items/{item}/folders/{a}")
    assert r.status_code == 200 and r.json() == {"item_id": item, "folder_ids": [b]}
    r = c.delete(f"/api/v1/items/{item}/folders/{b}")
    assert r.status_code == 200 and r.json()["folder_ids"] == []
    err(c.delete(f"/api/v1/items/{item}/folders/{b}"), 404, "not_found")
    err(c.delete(f"/api/v1/items/{item}/folders/bad"), 400, "invalid_id")
    err(c.delete(f"/api/v1/items/bad/folders/{b}"), 400, "invalid_id")
    item2 = make_item(user, folders=[a, b])
    err(api(user.token(write=True, folders=[a])).delete(f"/api/v1/items/{item2}/folders/{b}"), 404, "not_found")


# --- transport-level rules -------------------------------------------------------------------------------

def test_request_id_and_unknown_route(server, api, user) -> None:
    c = api(user.token())
    ids = {c.get("/api/v1/folders").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3
    err(c.get("/api/v1/nope"), 404, "not_found")


def test_body_size_cap(server, api, user) -> None:
    c = api(user.token(write=True))
    r = c.post("/api/v1/folders", content=b'{"name": "' + b"x" * (3 * 1024 * 1024) + b'"}',
               headers={"content-type": "application/json"})
    body = err(r, 413, "file_too_large")
    assert body["maxBytes"] > 0


def test_internal_error_body_carries_request_id() -> None:
    from lev.core import context
    from lev.core.errors import to_api_error
    from lev.middleware import error_response

    context.set_current(context.RequestInfo(request_id="rid-1"))
    err_ = to_api_error(RuntimeError("boom"))
    assert err_.status == 500 and err_.code == "internal_error"
    import json

    body = json.loads(error_response(err_).body)
    assert body == {"error": "internal_error", "message": err_.message, "request_id": "rid-1"}
