"""A shared folder across two API processes (issue 41): an invitation sent through api1 is accepted through api2, the
member searches it on both (each process caching the member's principal), the owner removes them through api1 and
api2 answers the member with nothing at once, on REST and MCP; a public page turned on through one process and
off through the other is 404 on both from that moment."""

from __future__ import annotations

from typing import Any

import httpx

from tests.cluster.conftest import Ops
from tests.cluster.test_cluster import mcp


def _user(ops: Ops, token: str) -> tuple[str, str]:
    row = ops.sql("SELECT u.id, u.email FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.prefix = %s", token[:12])
    return str(row[0][0]), str(row[0][1])


def _hits(c: httpx.Client, q: str) -> set[str]:
    r = c.get("/api/v1/search", params={"q": q, "mode": "keyword"})
    assert r.status_code == 200, r.text
    return {hit["item_id"] for hit in r.json()["results"]}


def _mcp_hits(c: httpx.Client, q: str) -> set[str]:
    out: dict[str, Any] = mcp(c, "tools/call", {"name": "search_knowledge_base",
                                                "arguments": {"query": q, "mode": "keyword"}})
    return {hit["item_id"] for hit in out["result"]["structuredContent"]["results"]}


def test_a_shared_folder_across_two_api_processes(ops: Ops) -> None:
    owner_token, member_token = ops.token(), ops.token()
    member_id, member_email = _user(ops, member_token)
    owner1, owner2 = (ops.client(owner_token, ops.c.api_url(n)) for n in (1, 2))
    member1, member2 = (ops.client(member_token, ops.c.api_url(n)) for n in (1, 2))

    folder = owner1.post("/api/v1/folders", json={"name": "Cluster reading"}).json()["id"]
    r = owner1.post("/api/v1/ingest", json={"kind": "text", "text": "Narwhal tusks are teeth that sense the sea.",
                                            "title": "Narwhals", "folder_id": folder})
    assert r.status_code == 200, r.text
    item = r.json()["user_item_id"]
    # both processes know the member (principal cached in each) before the invitation
    assert _hits(member1, "narwhal") == _hits(member2, "narwhal") == set()
    inv = owner1.post(f"/api/v1/folders/{folder}/invitations", json={"email": member_email, "role": "viewer"})
    assert inv.status_code == 201, inv.text
    assert [i["id"] for i in member2.get("/api/v1/invitations").json()["invitations"]] == [inv.json()["id"]]
    assert member2.post(f"/api/v1/invitations/{inv.json()['id']}/accept").status_code == 200
    for c in (member1, member2):  # the accept on api2 reaches api1's cached principal too
        assert _hits(c, "narwhal") == {item}
        assert _mcp_hits(c, "narwhal") == {item}
        assert c.get(f"/api/v1/items/{item}").status_code == 200

    assert owner1.delete(f"/api/v1/folders/{folder}/members/{member_id}").status_code == 204
    for c in (member2, member1):  # at once, in the other process first
        assert _hits(c, "narwhal") == set()
        assert _mcp_hits(c, "narwhal") == set()
        assert c.get(f"/api/v1/items/{item}").status_code == 404
        assert folder not in {f["id"] for f in c.get("/api/v1/folders").json()["folders"]}

    pub = owner2.put(f"/api/v1/folders/{folder}/publication")
    assert pub.status_code == 200, pub.text
    slug_path = "/p/" + pub.json()["url"].rsplit("/p/", 1)[1]
    for n in (1, 2):
        assert httpx.get(ops.c.api_url(n) + slug_path, timeout=30).status_code == 200
    assert owner1.delete(f"/api/v1/folders/{folder}/publication").status_code == 204
    for n in (2, 1):
        assert httpx.get(ops.c.api_url(n) + slug_path, timeout=30).status_code == 404
        assert httpx.get(ops.c.api_url(n) + slug_path + "/feed.atom", timeout=30).status_code == 404
