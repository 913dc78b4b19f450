"""The MCP surface: raw transport rules over HTTP, and the official `mcp` SDK client (pinned 2.3.0)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import httpx2
import jsonschema
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from lev.core.contract import mcp_tools

ACCEPT = "application/json, text/event-stream"


def rpc(server, token: str | None, method: str, params: Any = None, *, id_: Any = 1,  # type: ignore[no-untyped-def]
        headers: dict[str, str] | None = None) -> httpx.Response:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        msg["id"] = id_
    if params is not None:
        msg["params"] = params
    h = {"Accept": ACCEPT, "Content-Type": "application/json", **(headers or {})}
    if token:
        h["Authorization"] = f"Bearer {token}"
    return httpx.post(f"{server.url}/api/mcp", json=msg, headers=h, timeout=60)


def call(server, token: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    r = rpc(server, token, "tools/call", {"name": tool, "arguments": args})
    assert r.status_code == 200, r.text
    return r.json()


# --- transport ---------------------------------------------------------------------------------------------

def test_initialize_negotiates_versions(server, user) -> None:
    tok = user.token()
    for asked, got in (("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
                       ("2024-11-05", "2025-11-25")):
        body = rpc(server, tok, "initialize", {"protocolVersion": asked, "capabilities": {},
                                               "clientInfo": {"name": "t", "version": "1"}}).json()
        assert body["result"]["protocolVersion"] == got
        assert "tools" in body["result"]["capabilities"]
        assert body["result"]["serverInfo"]["name"] == "lev" and body["result"]["serverInfo"]["version"]


def test_notifications_ping_unknown_method_parse_error(server, user) -> None:
    tok = user.token()
    for method in ("notifications/initialized", "notifications/cancelled", "notifications/whatever"):
        r = rpc(server, tok, method, id_=None)
        assert r.status_code == 202 and r.content == b""
    assert rpc(server, tok, "ping").json() == {"jsonrpc": "2.0", "result": {}, "id": 1}
    body = rpc(server, tok, "prompts/list").json()
    assert body["error"]["code"] == -32601
    r = httpx.post(f"{server.url}/api/mcp", content=b"{nope", headers={"Authorization": f"Bearer {tok}",
                                                                       "Accept": ACCEPT})
    assert r.status_code == 200 and r.json()["error"]["code"] == -32700 and r.json()["id"] is None
    r = httpx.post(f"{server.url}/api/mcp", json={"jsonrpc": "1.0", "id": 3},
                   headers={"Authorization": f"Bearer {tok}", "Accept": ACCEPT})
    assert r.json()["error"]["code"] == -32600
    # server/discover is a 2026-07-28 method (tests/mcp/test_mcp_revisions.py): unknown to the older revisions.
    assert rpc(server, tok, "server/discover").json()["error"]["code"] == -32601


def test_get_delete_405_origin_403_version_400(server, user) -> None:
    tok = user.token()
    h = {"Authorization": f"Bearer {tok}"}
    assert httpx.get(f"{server.url}/api/mcp", headers=h).status_code == 405
    assert httpx.delete(f"{server.url}/api/mcp", headers=h).status_code == 405
    r = rpc(server, tok, "ping", headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and r.json()["error"]["code"] == -32600
    assert rpc(server, tok, "ping", headers={"Origin": server.url}).status_code == 200
    r = rpc(server, tok, "ping", headers={"MCP-Protocol-Version": "1999-01-01"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32022
    assert rpc(server, tok, "ping", headers={"MCP-Protocol-Version": "2025-06-18"}).status_code == 200


def test_sse_response_when_only_event_stream_accepted(server, user) -> None:
    r = rpc(server, user.token(), "ping", headers={"Accept": "text/event-stream"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    lines = r.text.strip().splitlines()
    assert lines[0] == "event: message" and json.loads(lines[1][len("data: "):])["result"] == {}


def test_auth_errors_are_401_with_www_authenticate(server, user, admin) -> None:
    for tok in (None, "lev_bogus", "garbage"):
        r = rpc(server, tok, "tools/list")
        assert r.status_code == 401 and r.headers["www-authenticate"].lower().startswith("bearer")
        assert r.json()["error"]["code"] == -32600
    tok = user.token(name="rev")
    admin.sql("UPDATE tokens SET revoked_at = now() WHERE name = 'rev' AND user_id = :u", u=user.id)
    r = rpc(server, tok, "ping")
    assert r.status_code == 401 and r.json()["error"]["data"]["error"] == "invalid_token"


def test_tools_list_matches_mcp_tools_json_for_read_only_token(server, user) -> None:
    tools = rpc(server, user.token(), "tools/list").json()["result"]["tools"]
    declared = mcp_tools()["tools"]
    assert [t["name"] for t in tools] == [t["name"] for t in declared] == [
        "search_knowledge_base", "get_item", "list_recent", "add_to_knowledge"]
    for got, want in zip(tools, declared, strict=True):
        assert got["inputSchema"] == want["inputSchema"] and got["outputSchema"] == want["outputSchema"]
        assert got["description"] == want["description"] and got["inputSchema"]["type"] == "object"


# --- tools ---------------------------------------------------------------------------------------------------

def _valid(tool: str, obj: dict[str, Any]) -> None:
    schema = next(t for t in mcp_tools()["tools"] if t["name"] == tool)["outputSchema"]
    jsonschema.validate(obj, schema)


def test_tools_end_to_end_and_scope(server, user) -> None:
    folder = user.folder("Agents")
    writer = user.token(write=True, folders=[folder])
    added = call(server, writer, "add_to_knowledge", {"text": "Narwhals use their tusk as a sensory organ.",
                                                      "title": "Narwhal facts"})["result"]
    assert added["isError"] is False
    res = added["structuredContent"]
    _valid("add_to_knowledge", res)
    assert json.loads(added["content"][0]["text"]) == res
    assert res["status"] == "ready" and res["folder_id"] == folder
    found = call(server, writer, "search_knowledge_base", {"query": "narwhal tusk"})["result"]["structuredContent"]
    _valid("search_knowledge_base", found)
    assert found["results"][0]["item_id"] == res["user_item_id"]
    item = call(server, writer, "get_item", {"item_id": res["user_item_id"]})["result"]["structuredContent"]
    _valid("get_item", item)
    assert "sensory organ" in item["text"] and item["folder_ids"] == [folder]
    recent = call(server, writer, "list_recent", {"limit": 5})["result"]["structuredContent"]
    _valid("list_recent", recent)
    assert recent["items"][0]["id"] == res["user_item_id"]
    inert = call(server, user.token(write=True), "add_to_knowledge", {"text": "kept out of the KB",
                                                                      "in_kb": False})["result"]
    inert_id = inert["structuredContent"]["user_item_id"]
    assert inert["structuredContent"]["folder_id"] is None
    kb_only = user.token()
    ids = [i["id"] for i in call(server, kb_only, "list_recent", {})["result"]["structuredContent"]["items"]]
    assert inert_id not in ids and res["user_item_id"] in ids
    assert call(server, kb_only, "get_item", {"item_id": inert_id})["result"]["isError"] is True
    everything = user.token(kb_only=False)
    ids = [i["id"] for i in call(server, everything, "list_recent", {})["result"]["structuredContent"]["items"]]
    assert inert_id in ids
    other_folder = user.folder("Elsewhere")
    scoped = user.token(folders=[other_folder])
    r = call(server, scoped, "get_item", {"item_id": res["user_item_id"]})["result"]
    assert r["isError"] is True and "not_found" in r["content"][0]["text"]
    assert call(server, scoped, "search_knowledge_base", {"query": "narwhal"})["result"]["structuredContent"][
        "results"] == []


def test_tool_errors_map_per_contract(server, user, api) -> None:
    ro = user.token()
    body = call(server, ro, "add_to_knowledge", {"text": "x"})
    assert body["error"]["code"] == -32605
    assert body["error"]["data"]["error"] == "capability_denied"
    assert body["error"]["data"]["required"] == "write" and body["error"]["data"]["have"] == ["read"]
    rw = user.token(write=True)
    for args, where in (({"url": "http://x", "text": "y"}, "exactly one"), ({}, "exactly one"),
                        ({"text": 5}, "text"), ({"text": "a", "bogus": 1}, "arguments")):
        body = call(server, rw, "add_to_knowledge", args)
        assert body["error"]["code"] == -32602 and where in body["error"]["message"], body
    body = call(server, rw, "search_knowledge_base", {"query": "x", "mode": "fuzzy"})
    assert body["error"]["code"] == -32602 and "mode" in body["error"]["message"]
    body = call(server, rw, "search_knowledge_base", {"limit": 3})
    assert body["error"]["code"] == -32602 and "query" in body["error"]["message"]
    body = call(server, rw, "get_item", {"item_id": "not-a-uuid"})
    assert body["error"]["code"] == -32602 and "item_id" in body["error"]["message"]
    body = call(server, rw, "no_such_tool", {})
    assert body["error"]["code"] == -32602
    body = call(server, rw, "add_to_knowledge", {"url": "http://127.0.0.1:1/nothing"})
    assert body["result"]["isError"] is True and "ingest_failed" in body["result"]["content"][0]["text"]
    body = call(server, rw, "get_item", {"item_id": str(uuid.uuid4())})
    assert body["result"]["isError"] is True


# --- the official SDK (every tool on 2026-07-28 and on 2025-11-25: tests/mcp/test_mcp_revisions.py) ----------------

async def _sdk_errors(url: str, ro_token: str, bad_token: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ro_token}"}, timeout=60) as http:
        async with streamable_http_client(f"{url}/api/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                try:
                    await session.call_tool("add_to_knowledge", {"text": "nope"})
                except MCPError as exc:
                    out["denied"] = (exc.error.code, exc.error.data)
    try:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {bad_token}"}, timeout=30) as http:
            async with streamable_http_client(f"{url}/api/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await asyncio.wait_for(session.initialize(), 30)
        out["unauthorized"] = "connected"
    except BaseException as exc:  # the SDK surfaces the 401 as an exception (group)
        out["unauthorized"] = repr(exc)
    return out


def test_official_sdk_reads_errors(server, user) -> None:
    out = asyncio.run(_sdk_errors(server.url, user.token(), "lev_" + "z" * 43))
    code, data = out["denied"]
    assert code == -32605 and data["error"] == "capability_denied" and data["required"] == "write"
    assert out["unauthorized"] != "connected" and "-32600" in out["unauthorized"]
    assert "invalid_token" in out["unauthorized"]
