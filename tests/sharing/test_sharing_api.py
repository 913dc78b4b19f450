"""Shared folders over REST and MCP with several users: invitations, roles (owner, editor, viewer, outsider), what
each one sees and may change, a removed member losing everything at once (tokens included), bad input."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.mcp.test_mcp import call
from tests.stack import Admin, User, new_user


def ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json() if r.content else None


def err(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == code and body.get("message"), body
    return str(body["message"])


def note(c: httpx.Client, text: str, title: str, folder: str | None = None) -> str:
    body: dict[str, Any] = {"kind": "text", "text": text, "title": title}
    if folder:
        body["folder_id"] = folder
    return str(ok(c.post("/api/v1/ingest", json=body))["user_item_id"])


def found(c: httpx.Client, q: str, **params: str) -> set[str]:
    r = ok(c.get("/api/v1/search", params={"q": q, "mode": "keyword", **params}))
    return {hit["item_id"] for hit in r["results"]}


def share(owner: httpx.Client, folder: str, member: User, member_client: httpx.Client, role: str) -> None:
    inv = ok(owner.post(f"/api/v1/folders/{folder}/invitations", json={"email": member.email, "role": role}), 201)
    assert inv["status"] == "pending" and inv["role"] == role and inv["folder_id"] == folder
    assert ok(member_client.post(f"/api/v1/invitations/{inv['id']}/accept")) == {"folder_id": folder, "role": role}


def test_invitation_roles_and_what_each_member_sees(api, admin: Admin, server) -> None:
    owner, editor, viewer, outsider = (new_user(admin) for _ in range(4))
    folder = owner.folder("Reading group")
    o = api(owner.token(write=True, kb_only=False))
    e = api(editor.token(write=True, kb_only=False))
    v_token = viewer.token(write=True, kb_only=False)
    v = api(v_token)
    x = api(outsider.token(write=True, kb_only=False))

    inv = ok(o.post(f"/api/v1/folders/{folder}/invitations", json={"email": editor.email.upper(), "role": "editor"}),
             201)
    assert set(inv) == {"id", "folder_id", "email", "role", "status", "created_at", "accept_url", "link_expires_at",
                        "emailed"} and inv["emailed"] is False
    listed = ok(e.get("/api/v1/invitations"))["invitations"]
    assert listed == [{"id": inv["id"], "folder_id": folder, "folder_name": "Reading group", "role": "editor",
                       "invited_by": owner.email, "status": "pending", "created_at": inv["created_at"]}]
    assert ok(x.get("/api/v1/invitations")) == {"invitations": [], "email_verified": True}
    err(x.post(f"/api/v1/invitations/{inv['id']}/accept"), 404, "not_found")  # not addressed to them
    assert ok(e.post(f"/api/v1/invitations/{inv['id']}/accept")) == {"folder_id": folder, "role": "editor"}
    assert ok(e.get("/api/v1/invitations")) == {"invitations": [], "email_verified": True}
    err(e.post(f"/api/v1/invitations/{inv['id']}/accept"), 404, "not_found")  # answered already
    share(o, folder, viewer, v, "viewer")

    mine = ok(o.get("/api/v1/folders"))["folders"]
    assert [(f["id"], f["role"], f["shared"], "owner_email" in f) for f in mine] == [(folder, "owner", True, False)]
    theirs = ok(e.get("/api/v1/folders"))["folders"]
    assert [(f["id"], f["role"], f["shared"], f["owner_email"]) for f in theirs] == [
        (folder, "editor", True, owner.email)]
    assert ok(x.get("/api/v1/folders")) == {"folders": []}
    members = ok(o.get(f"/api/v1/folders/{folder}/members"))["members"]
    assert [(m["email"], m["role"]) for m in members] == [(owner.email, "owner"), (editor.email, "editor"),
                                                          (viewer.email, "viewer")]
    assert ok(v.get(f"/api/v1/folders/{folder}/members"))["members"] == members

    owned = note(o, "Pangolins roll into a ball of overlapping scales.", "Pangolins", folder)
    added = note(e, "Pangolins eat ants with a tongue longer than their body.", "Pangolin tongues", folder)
    private = note(e, "Pangolins are my private obsession, filed nowhere.", "Private pangolins")
    err(v.post("/api/v1/ingest", json={"kind": "text", "text": "viewer's pangolin", "folder_id": folder}), 403,
        "forbidden_scope")
    err(x.post("/api/v1/ingest", json={"kind": "text", "text": "outsider's pangolin", "folder_id": folder}), 404,
        "folder_not_found")

    # members read and search the folder, whoever saved the item; a member's own items elsewhere stay theirs
    assert found(v, "pangolins") == {owned, added}
    assert found(o, "pangolins") == {owned, added}
    assert found(e, "pangolins") == {owned, added, private}
    assert found(v, "pangolins", folder_id=folder) == {owned, added}
    for mode in ("hybrid", "semantic"):  # every plan of the scope SQL: nothing outside the folder, all of it inside
        hits = ok(v.get("/api/v1/search", params={"q": "pangolin tongues", "mode": mode}))["results"]
        assert {h["item_id"] for h in hits} == {owned, added}
    assert {i["id"] for i in ok(v.get("/api/v1/items", params={"folder_id": folder}))["items"]} == {owned, added}
    assert ok(v.get(f"/api/v1/items/{added}"))["folder_ids"] == [folder]
    err(o.get(f"/api/v1/items/{private}"), 404, "not_found")
    err(v.get(f"/api/v1/items/{private}"), 404, "not_found")
    assert ok(v.get(f"/api/v1/items/{owned}/similar"))["item_id"] == owned
    assert ok(o.get("/api/v1/folders"))["folders"][0]["item_count"] == 2
    # ... and so does an agent over MCP, with a whole-library token
    mcp = call(server, v_token, "search_knowledge_base", {"query": "pangolins", "mode": "keyword"})
    assert {r["item_id"] for r in mcp["result"]["structuredContent"]["results"]} == {owned, added}
    got = call(server, v_token, "get_item", {"item_id": added})["result"]["structuredContent"]
    assert got["title"] == "Pangolin tongues"

    # an outsider finds nothing and reaches nothing
    assert found(x, "pangolins") == set()
    for path in (f"/api/v1/items/{owned}", f"/api/v1/folders/{folder}/members", f"/api/v1/folders/{folder}/publication",
                 f"/api/v1/items/{owned}/similar"):
        err(x.get(path), 404, "not_found")
    err(x.get("/api/v1/items", params={"folder_id": folder}), 404, "not_found")
    err(x.get("/api/v1/search", params={"q": "pangolins", "folder_id": folder}), 404, "not_found")

    # the editor files and unfiles; the folder itself, its people and its page are the owner's
    ok(e.post(f"/api/v1/items/{private}/folders", json={"folder_ids": [folder]}))
    assert found(v, "pangolins") == {owned, added, private}
    ok(e.delete(f"/api/v1/items/{private}/folders/{folder}"))
    ok(e.delete(f"/api/v1/items/{owned}/folders/{folder}"))  # an editor takes anyone's item out of the folder
    assert found(v, "pangolins") == {added}
    ok(o.post(f"/api/v1/items/{owned}/folders", json={"folder_ids": [folder]}))
    err(v.delete(f"/api/v1/items/{added}/folders/{folder}"), 403, "forbidden_scope")
    editors_own = e.post("/api/v1/folders", json={"name": "Editor's own"}).json()["id"]
    err(e.post(f"/api/v1/items/{owned}/folders", json={"folder_ids": [editors_own]}), 403, "forbidden_scope")
    err(v.post(f"/api/v1/items/{owned}/folders", json={"folder_ids": [folder]}), 403, "forbidden_scope")
    err(e.delete(f"/api/v1/items/{owned}"), 403, "forbidden_scope")  # an item is its saver's
    err(e.patch(f"/api/v1/items/{owned}", json={"title": "Mine now"}), 403, "forbidden_scope")
    assert ok(e.post("/api/v1/items/bulk-delete", json={"ids": [owned]})) == {"deleted": [], "not_found": [owned]}
    err(x.delete(f"/api/v1/items/{owned}"), 404, "not_found")
    assert ok(o.get(f"/api/v1/items/{owned}"))["title"] == "Pangolins"
    err(e.patch(f"/api/v1/folders/{folder}", json={"name": "Renamed"}), 403, "forbidden_scope")
    err(e.delete(f"/api/v1/folders/{folder}"), 403, "forbidden_scope")
    err(e.post(f"/api/v1/folders/{folder}/invitations", json={"email": "a@example.com", "role": "viewer"}), 403,
        "forbidden_scope")
    err(e.put(f"/api/v1/folders/{folder}/publication"), 403, "forbidden_scope")
    err(e.patch(f"/api/v1/folders/{folder}/members/{viewer.id}", json={"role": "editor"}), 403, "forbidden_scope")
    err(v.delete(f"/api/v1/folders/{folder}/members/{editor.id}"), 403, "forbidden_scope")
    err(x.delete(f"/api/v1/folders/{folder}"), 404, "not_found")
    err(x.post(f"/api/v1/folders/{folder}/invitations", json={"email": "a@example.com", "role": "viewer"}), 404,
        "not_found")

    # roles change; a viewer made an editor adds items
    changed = ok(o.patch(f"/api/v1/folders/{folder}/members/{viewer.id}", json={"role": "editor"}))
    assert (changed["email"], changed["role"]) == (viewer.email, "editor")
    fact = note(v, "The viewer, now an editor, adds a pangolin fact.", "Pangolin fact", folder)
    ok(o.patch(f"/api/v1/folders/{folder}/members/{viewer.id}", json={"role": "viewer"}))
    err(v.post("/api/v1/ingest", json={"kind": "text", "text": "no more", "folder_id": folder}), 403,
        "forbidden_scope")

    # the owner removes the editor: at once, on both surfaces, nothing of the folder is left to them
    e_token_scoped = editor.token(folders=[folder], kb_only=False)  # a token scoped to the shared folder
    assert found(api(e_token_scoped), "pangolins") >= {owned, added}
    assert ok(o.delete(f"/api/v1/folders/{folder}/members/{editor.id}"), 204) is None
    assert found(e, "pangolins") == {added, private}  # their own items stay theirs
    err(e.get(f"/api/v1/items/{owned}"), 404, "not_found")
    assert folder not in {f["id"] for f in ok(e.get("/api/v1/folders"))["folders"]}
    assert ok(e.get(f"/api/v1/items/{added}"))["folder_ids"] == []
    mcp = call(server, e.headers["Authorization"].split()[1], "search_knowledge_base",
               {"query": "pangolins", "mode": "keyword"})
    assert {r["item_id"] for r in mcp["result"]["structuredContent"]["results"]} == {added, private}
    err(api(e_token_scoped).get("/api/v1/folders"), 401, "invalid_token")  # its only folder is gone: revoked
    # what the editor filed stays in the folder, now as the owner's
    titles = {i["title"] for i in ok(o.get("/api/v1/items", params={"folder_id": folder}))["items"]}
    assert titles == {"Pangolins", "Pangolin tongues", "Pangolin fact"}
    assert "Pangolin tongues" in {i["title"] for i in ok(v.get("/api/v1/items", params={"folder_id": folder}))["items"]}

    # the viewer leaves
    assert ok(v.delete(f"/api/v1/folders/{folder}/members/{viewer.id}"), 204) is None
    assert found(v, "pangolin") == {fact}  # what they saved stays theirs
    err(v.get(f"/api/v1/items/{owned}"), 404, "not_found")
    assert ok(o.get("/api/v1/folders"))["folders"][0]["shared"] is False
    assert "delete the folder" in err(o.delete(f"/api/v1/folders/{folder}/members/{owner.id}"), 409,
                                      "owner_fixed")


def test_bad_input_is_refused_in_words_and_changes_nothing(api, admin: Admin) -> None:
    owner, member = new_user(admin), new_user(admin)
    folder = owner.folder("Careful")
    o = api(owner.token(write=True))
    m = api(member.token(write=True))
    share(o, folder, member, m, "viewer")
    path = f"/api/v1/folders/{folder}/invitations"
    assert "yourself" in err(o.post(path, json={"email": owner.email, "role": "viewer"}), 409, "already_member")
    assert "role" in err(o.post(path, json={"email": "x@example.com", "role": "admin"}), 400, "invalid_body")
    assert "email" in err(o.post(path, json={"email": "not-an-email", "role": "viewer"}), 400, "invalid_body")
    assert "member" in err(o.post(path, json={"email": member.email, "role": "editor"}), 409, "already_member")
    ok(o.post(path, json={"email": "later@example.com", "role": "viewer"}), 201)
    assert "already" in err(o.post(path, json={"email": "LATER@example.com", "role": "editor"}), 409,
                            "already_invited")
    listed = ok(o.get(f"/api/v1/folders/{folder}/members"))
    assert [i["email"] for i in listed["invitations"]] == ["later@example.com"]
    assert len(listed["members"]) == 2
    assert "role" in err(o.patch(f"/api/v1/folders/{folder}/members/{member.id}", json={"role": "owner"}), 400,
                         "invalid_body")
    err(o.patch(f"/api/v1/folders/{folder}/members/{owner.id}", json={"role": "viewer"}), 409, "owner_fixed")
    err(o.delete(f"{path}/00000000-0000-4000-8000-000000000000"), 404, "not_found")
    err(o.get("/api/v1/folders/not-a-uuid/members"), 400, "invalid_id")
    # a viewer's token scoped to the shared folder reads it, and adds nothing to it (no auto-filing either)
    scoped = api(member.token(write=True, folders=[folder]))
    assert ok(scoped.get("/api/v1/folders"))["folders"][0]["role"] == "viewer"
    err(scoped.post("/api/v1/ingest", json={"kind": "text", "text": "auto-filed?"}), 403, "forbidden_scope")
    # read-only and folder-scoped tokens do not manage sharing
    err(api(owner.token()).post(path, json={"email": "y@example.com", "role": "viewer"}), 403, "capability_denied")
    err(api(owner.token(write=True, folders=[folder])).post(path, json={"email": "y@example.com", "role": "viewer"}),
        403, "forbidden_scope")
    # a withdrawn invitation disappears; an account the operator makes later with that email sees a new one
    inv = ok(o.get(f"/api/v1/folders/{folder}/members"))["invitations"][0]
    assert ok(o.delete(f"{path}/{inv['id']}"), 204) is None
    assert ok(o.get(f"/api/v1/folders/{folder}/members"))["invitations"] == []
    email = f"late-{member.id.hex[:8]}@example.com"
    sent = ok(o.post(path, json={"email": email, "role": "editor"}), 201)
    late = User(new_user(admin).id, email, admin)
    admin.sql("UPDATE users SET email = :e WHERE id = :i", e=email, i=late.id)
    lc = api(late.token(write=True))
    assert [i["id"] for i in ok(lc.get("/api/v1/invitations"))["invitations"]] == [sent["id"]]
    assert ok(lc.post(f"/api/v1/invitations/{sent['id']}/decline"), 204) is None
    assert ok(lc.get("/api/v1/invitations")) == {"invitations": [], "email_verified": True}
    assert ok(lc.get("/api/v1/folders")) == {"folders": []}


def test_a_member_exports_their_own_items_only_and_the_log_stays_theirs(api, admin: Admin) -> None:
    owner, member = new_user(admin), new_user(admin)
    folder = owner.folder("Shared notes")
    o = api(owner.token(write=True, kb_only=False))
    m = api(member.token(write=True, kb_only=False))
    share(o, folder, member, m, "editor")
    note(o, "The owner's walrus note.", "Owner walrus", folder)
    note(m, "The member's walrus note.", "Member walrus", folder)
    assert len(ok(m.get("/api/v1/items"))["items"]) == 2
    with m.stream("GET", "/api/v1/export") as r:
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert lines[0]["items"] == "own" and "shared with you" in lines[0]["note"]
    items = [line for line in lines if line["type"] == "item"]
    assert [(i["title"], i["folder_ids"]) for i in items] == [("Member walrus", [])]
    assert [line for line in lines if line["type"] == "folder"] == []
    assert lines[-1]["type"] == "end" and (lines[-1]["folders"], lines[-1]["items"]) == (0, 1)
    # the member's searches of the shared folder are in the member's activity log, never in the owner's
    m.get("/api/v1/search", params={"q": "walrus", "mode": "keyword"})
    deadline = time.monotonic() + 60
    while not any(e.get("query") == "walrus" for e in ok(m.get("/api/v1/activity", params={"per_page": 100}))[
            "entries"]):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    mine = ok(o.get("/api/v1/activity", params={"per_page": 100}))
    assert not any(e.get("query") == "walrus" for e in mine["entries"])


def test_a_removal_racing_with_filing_leaves_nothing_of_the_member_in_the_folder(api, admin: Admin) -> None:
    """Ingests into the folder while the owner removes their editor: each acknowledged one was handed over (it is in
    the folder as the owner's), none is left in the folder as the member's, none failed with a 500."""
    owner, editor = new_user(admin), new_user(admin)
    folder = owner.folder("Raced")
    o = api(owner.token(write=True, kb_only=False))
    e_token = editor.token(write=True, kb_only=False)
    share(o, folder, editor, api(e_token), "editor")

    def ingest(n: int) -> int:
        c = api(e_token)
        return int(c.post("/api/v1/ingest", json={"kind": "text", "text": f"Race note {n} about lynxes.",
                                                  "folder_id": folder}).status_code)

    with ThreadPoolExecutor(6) as pool:
        codes = list(pool.map(ingest, range(3)))
        running = [pool.submit(ingest, n) for n in range(3, 15)]
        removed = o.delete(f"/api/v1/folders/{folder}/members/{editor.id}")
        codes += [f.result() for f in running]
    assert removed.status_code == 204, removed.text
    assert set(codes) <= {200, 403, 404}, codes
    left = admin.sql("SELECT count(*) FROM item_folders f JOIN user_items u ON u.id = f.item_id "
                     "WHERE f.folder_id = :f AND u.user_id = :u", f=folder, u=editor.id)[0][0]
    assert left == 0
    handed = admin.sql("SELECT count(*) FROM item_folders f JOIN user_items u ON u.id = f.item_id "
                       "WHERE f.folder_id = :f AND u.user_id = :u", f=folder, u=owner.id)[0][0]
    assert handed == codes.count(200)
    assert len(ok(api(e_token).get("/api/v1/items", params={"per_page": 100}))["items"]) == codes.count(200)
