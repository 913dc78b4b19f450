"""Items as MCP resources (issue 52): `resources/templates/list` offers `lev://items/{item_id}`; `resources/read`
answers an item's text in pages within get_item's 64 KB budget, each naming the next (`next_uri`), under the
token's scope and kb_only; `resources/list` stays the view whatever the library holds. On the initialize-era
revisions, on 2026-07-28, and through the official Python SDK client."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx2
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

from lev.mcp.budget import GET_ITEM_BYTES
from tests.mcp.test_mcp import rpc
from tests.mcp.test_mcp_revisions import modern
from tests.stack import User, make_item, new_user

TEMPLATE = "lev://items/{item_id}"


def _text_item(user: User, text: str, **kw: Any) -> str:
    item = make_item(user, **kw)
    user.admin.sql("UPDATE contents SET text = :t WHERE id = (SELECT content_id FROM user_items WHERE id = :i)",
                   t=text, i=item)
    return item


def _read(server, token: str, uri: str) -> tuple[dict[str, Any], int]:  # type: ignore[no-untyped-def]
    r = rpc(server, token, "resources/read", {"uri": uri})
    assert r.status_code == 200, r.text
    return r.json(), len(r.content)


def test_the_item_template_is_listed_and_the_list_stays_the_view(server, user: User) -> None:
    tok = user.token()
    listed = rpc(server, tok, "resources/templates/list").json()["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in listed] == [TEMPLATE]
    assert listed[0]["name"] and listed[0]["mimeType"] == "text/plain" and "next_uri" in listed[0]["description"]
    before = rpc(server, tok, "resources/list").json()["result"]["resources"]
    for n in range(3):
        make_item(user, title=f"More {n}")
    after = rpc(server, tok, "resources/list").json()["result"]["resources"]
    assert after == before and [r["uri"] for r in after] == ["ui://lev/results.html"]  # nothing of the library
    # 2026-07-28: the same template, cacheable; an item's read is not (its text changes when captured again)
    found = modern(server, tok, "resources/templates/list").json()["result"]
    assert found["resourceTemplates"] == listed and found["ttlMs"] > 0
    item = _text_item(user, "Octopuses have three hearts.")
    uri = f"lev://items/{item}"
    got = modern(server, tok, "resources/read", {"uri": uri}, headers={"Mcp-Name": uri}).json()["result"]
    assert got["contents"][0]["text"] == "Octopuses have three hearts." and "ttlMs" not in got
    assert modern(server, tok, "resources/read", {"uri": uri}).json()["error"]["code"] == -32020  # no Mcp-Name


def test_a_long_item_reads_in_pages_within_the_budget_and_the_pages_make_the_whole(server, user: User) -> None:
    tok = user.token()
    # 300,000 characters, many of them 3 and 4 bytes in UTF-8: no page may pass 64 KB on the wire
    text = "".join(f"Passage {n} about tide pools — 潮だまり 🐚. " for n in range(8000))
    item = _text_item(user, text, title="Tide pools")
    uri, pages, seen = f"lev://items/{item}", [], 0
    while uri is not None:
        body, size = _read(server, tok, uri)
        assert size <= GET_ITEM_BYTES, size
        (content,) = body["result"]["contents"]
        facts = content["_meta"]["lev/item"]
        assert content["uri"] == uri and content["mimeType"] == "text/plain"
        assert (facts["item_id"], facts["title"], facts["offset"], facts["total_chars"]) == (item, "Tide pools", seen,
                                                                                            len(text))
        pages.append(content["text"])
        seen += len(content["text"])
        assert facts["next_offset"] == (seen if seen < len(text) else None)
        uri = facts["next_uri"]
    assert len(pages) > 4 and "".join(pages) == text
    # get_item's pages are the same cut: the budget is one rule
    first = rpc(server, tok, "tools/call", {"name": "get_item", "arguments": {"item_id": item}}).json()
    assert json.loads(first["result"]["content"][0]["text"])["next_offset"] <= len(pages[0]) + 200


def test_scope_and_kb_only_rule_as_get_item_and_bad_uris_are_refused(server, user: User, admin) -> None:  # type: ignore[no-untyped-def]
    inside, outside = user.folder("Inside"), user.folder("Outside")
    mine = _text_item(user, "In the folder.", folders=[inside])
    other = _text_item(user, "Elsewhere.", folders=[outside])
    inert = _text_item(user, "Not in the KB.", folders=[inside], in_kb=False)
    scoped = user.token(folders=[inside])
    assert _read(server, scoped, f"lev://items/{mine}")[0]["result"]["contents"][0]["text"] == "In the folder."
    for token, item in ((scoped, other), (scoped, inert), (user.token(), inert)):  # kb_only is the default
        err = _read(server, token, f"lev://items/{item}")[0]["error"]
        assert err["code"] == -32002 and err["data"]["error"] == "not_found", err
    assert _read(server, user.token(kb_only=False), f"lev://items/{inert}")[0]["result"]["contents"][0]["text"] == \
        "Not in the KB."
    theirs = new_user(admin)
    err = _read(server, theirs.token(), f"lev://items/{mine}")[0]["error"]
    assert err["code"] == -32002 and err["data"]["error"] == "not_found"
    for bad in (f"lev://items/{mine}?offset=x", f"lev://items/{mine}?offset=-1", f"lev://items/{mine}?page=2"):
        err = _read(server, scoped, bad)[0]["error"]
        assert err["code"] == -32602 and err["data"]["error"] == "invalid_body", (bad, err)
    for unknown in ("lev://items/not-a-uuid", f"lev://folders/{inside}", f"https://example.org/{mine}",
                    f"lev://items/{uuid.uuid4()}"):
        err = _read(server, scoped, unknown)[0]["error"]
        assert err["code"] == -32002 and err["data"]["error"] == "not_found", (unknown, err)
    assert _read(server, scoped, f"lev://items/{mine}?offset=3")[0]["result"]["contents"][0]["text"] == \
        "the folder."


async def _sdk(url: str, token: str, uri: str) -> dict[str, Any]:
    """The SDK's session on 2025-11-25 (initialize), and its high-level Client on 2026-07-28 (no fallback)."""
    out: dict[str, Any] = {}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with streamable_http_client(f"{url}/api/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                templates = await session.list_resource_templates()
                got = await session.read_resource(uri)
                out["legacy"] = ([t.uri_template for t in templates.resource_templates], got.contents[0].text,
                                 init.capabilities.resources is not None)
        async with Client(streamable_http_client(f"{url}/api/mcp", http_client=http), mode="auto") as c:
            templates = await c.list_resource_templates()
            got = await c.read_resource(uri)
            out["modern"] = ([t.uri_template for t in templates.resource_templates], got.contents[0].text,
                             c.protocol_version)
    return out


def test_the_official_sdk_lists_the_template_and_reads_an_item(server, user: User) -> None:
    item = _text_item(user, "Pangolins are covered in scales.")
    out = asyncio.run(_sdk(server.url, user.token(), f"lev://items/{item}"))
    assert out["legacy"] == ([TEMPLATE], "Pangolins are covered in scales.", True)
    assert out["modern"] == ([TEMPLATE], "Pangolins are covered in scales.", "2026-07-28")
