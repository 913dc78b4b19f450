"""MCP revision 2026-07-28 beside the initialize-era revisions on the one endpoint: the raw wire rules
(`server/discover`, per-request `_meta`, `resultType`, cache hints, `Mcp-Method`/`Mcp-Name`, the HTTP statuses),
and the official SDK 2.x client (pinned 2.3.0) on 2026-07-28 without falling back, and pinned to 2025-11-25."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.methods import validate_server_result

from lev.core.contract import mcp_tools

ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"
SUPPORTED = [MODERN, "2025-11-25", "2025-06-18", "2025-03-26"]
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "lev-tests", "version": "1"}}
TOOL_NAMES = [t["name"] for t in mcp_tools()["tools"]]


def modern(server, token: str, method: str, params: dict[str, Any] | None = None, *,  # type: ignore[no-untyped-def]
           meta: Any = META, headers: dict[str, str | None] | None = None, id_: Any = 1) -> httpx.Response:
    """POST one 2026-07-28 request, stamped as a conforming client stamps it unless `meta`/`headers` say
    otherwise (a header given as None is left out)."""
    params = dict(params or {})
    if meta is not None:
        params["_meta"] = meta
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        msg["id"] = id_
    h: dict[str, str | None] = {"Accept": ACCEPT, "Authorization": f"Bearer {token}", "MCP-Protocol-Version": MODERN,
                                "Mcp-Method": method}
    if method == "tools/call" and isinstance(params.get("name"), str):
        h["Mcp-Name"] = params["name"]
    h.update(headers or {})
    return httpx.post(f"{server.url}/api/mcp", json=msg, headers={k: v for k, v in h.items() if v is not None},
                      timeout=60)


def legacy(server, token: str, method: str, params: dict[str, Any] | None = None) -> httpx.Response:  # type: ignore[no-untyped-def]
    msg = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    return httpx.post(f"{server.url}/api/mcp", json=msg, timeout=60, headers={
        "Accept": ACCEPT, "Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"})


def refused(r: httpx.Response, status: int, code: int, error: str) -> dict[str, Any]:
    assert r.status_code == status and r.headers["content-type"].startswith("application/json"), (r.status_code, r.text)
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["code"] == code and body["error"]["data"]["error"] == error, body
    return dict(body["error"])


# --- the revision's results --------------------------------------------------------------------------------------

def test_discover_and_results_carry_the_revision_fields(server, user) -> None:
    tok = user.token()
    r = modern(server, tok, "server/discover")
    assert r.status_code == 200 and "mcp-session-id" not in r.headers
    found = r.json()["result"]
    validate_server_result("server/discover", MODERN, found)  # the SDK's own 2026-07-28 schema
    assert found["supportedVersions"] == SUPPORTED
    assert found["capabilities"] == {"tools": {"listChanged": False}, "resources": {"listChanged": False}}
    assert found["resultType"] == "complete" and found["ttlMs"] == 300_000 and found["cacheScope"] == "private"
    assert found["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "lev" and found["instructions"]

    listed = modern(server, tok, "tools/list").json()["result"]
    validate_server_result("tools/list", MODERN, listed)
    assert (listed["resultType"], listed["ttlMs"], listed["cacheScope"]) == ("complete", 300_000, "private")
    old = legacy(server, tok, "tools/list").json()["result"]
    assert listed["tools"] == old["tools"] and [t["name"] for t in old["tools"]] == TOOL_NAMES
    assert set(old) == {"tools"}  # the older revisions' answers are unchanged

    called = modern(server, tok, "tools/call", {"name": "list_recent", "arguments": {"limit": 2}}).json()["result"]
    validate_server_result("tools/call", MODERN, called)
    assert called["resultType"] == "complete" and "ttlMs" not in called and called["isError"] is False
    assert called["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "lev"
    missing = modern(server, tok, "tools/call", {"name": "get_item", "arguments": {"item_id": str(uuid.uuid4())}})
    assert missing.status_code == 200 and missing.json()["result"]["isError"] is True
    assert missing.json()["result"]["resultType"] == "complete"
    # A base64-sentinel Mcp-Name is decoded before it is compared.
    encoded = "=?base64?" + base64.b64encode(b"list_recent").decode() + "?="
    assert modern(server, tok, "tools/call", {"name": "list_recent", "arguments": {}},
                  headers={"Mcp-Name": encoded}).status_code == 200
    # Notifications are acknowledged and dropped.
    r = modern(server, tok, "notifications/cancelled", {"requestId": 1}, id_=None)
    assert r.status_code == 202 and r.content == b""


def test_tool_errors_are_the_same_under_every_revision(server, user) -> None:
    ro = user.token()
    args = {"name": "add_to_knowledge", "arguments": {"text": "nope"}}
    new, old = modern(server, ro, "tools/call", args), legacy(server, ro, "tools/call", args)
    assert new.status_code == old.status_code == 200 and new.json()["error"] == old.json()["error"]
    assert new.json()["error"]["code"] == -32605 and new.json()["error"]["data"]["error"] == "capability_denied"
    bad = {"name": "search_knowledge_base", "arguments": {"query": "x", "mode": "fuzzy"}}
    new, old = modern(server, ro, "tools/call", bad), legacy(server, ro, "tools/call", bad)
    assert old.status_code == 200 and new.status_code == 400  # the revision's status for -32602
    assert new.json()["error"] == old.json()["error"] and new.json()["error"]["code"] == -32602


# --- the revision's HTTP status rules ------------------------------------------------------------------------

def test_unsupported_version_is_400_naming_every_revision(server, user) -> None:
    for token in (user.token(), None):  # checked before anything else, the token included
        r = httpx.post(f"{server.url}/api/mcp", timeout=30, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                       headers={"MCP-Protocol-Version": "1999-01-01", "Accept": ACCEPT,
                                **({"Authorization": f"Bearer {token}"} if token else {})})
        err = refused(r, 400, -32022, "unsupported_protocol_version")
        assert err["data"]["supported"] == SUPPORTED and err["data"]["requested"] == "1999-01-01"


def test_header_mismatches_are_400_and_change_nothing(server, user, admin) -> None:
    tok = user.token(write=True)
    add = {"name": "add_to_knowledge", "arguments": {"text": "must never be stored"}}
    legacy_meta = {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}
    cases = [
        modern(server, tok, "tools/call", add, headers={"Mcp-Method": None}),
        modern(server, tok, "tools/call", add, headers={"Mcp-Method": "tools/list"}),
        modern(server, tok, "tools/call", add, headers={"Mcp-Name": None}),
        modern(server, tok, "tools/call", add, headers={"Mcp-Name": "search_knowledge_base"}),
        modern(server, tok, "tools/call", add, headers={"Mcp-Name": "=?base64?not base64?="}),
        modern(server, tok, "tools/call", add, meta=legacy_meta),  # the header says 2026-07-28, the body not
        modern(server, tok, "tools/call", add, headers={"MCP-Protocol-Version": None}),  # body modern, no header
        modern(server, tok, "tools/call", add, headers={"MCP-Protocol-Version": "2025-11-25"}),
    ]
    for r in cases:
        refused(r, 400, -32020, "header_mismatch")
    assert "Mcp-Method header is missing" in cases[0].json()["error"]["message"]
    assert "Mcp-Name header is missing" in cases[2].json()["error"]["message"]
    twice = httpx.post(f"{server.url}/api/mcp", timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}, headers=[
        ("Accept", ACCEPT), ("Authorization", f"Bearer {tok}"), ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/list"), ("Mcp-Method", "tools/list")])
    refused(twice, 400, -32020, "header_mismatch")
    assert admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=user.id)[0][0] == 0


def test_envelope_meta_and_unknown_methods(server, user) -> None:
    tok = user.token()
    refused(modern(server, tok, "tools/list", meta=None), 400, -32602, "invalid_body")
    no_caps = {k: v for k, v in META.items() if not k.endswith("clientCapabilities")}
    refused(modern(server, tok, "tools/list", meta=no_caps), 400, -32602, "invalid_body")
    refused(modern(server, tok, "tools/list", meta={**META, "io.modelcontextprotocol/clientCapabilities": []}),
            400, -32602, "invalid_body")
    assert modern(server, tok, "tools/list", {"": "x", "name": "y"}).status_code == 200  # extra params are ignored
    for method in ("ping", "initialize", "prompts/list", "resources/subscribe"):  # not methods of this revision
        err = refused(modern(server, tok, method), 404, -32601, "method_not_found")
        assert "server/discover" in err["message"]
    h = {"Accept": ACCEPT, "Authorization": f"Bearer {tok}", "MCP-Protocol-Version": MODERN, "Mcp-Method": "x"}
    for body in (b"{nope", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"q": "\\u0000"}}',
                 b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}',
                 b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]',
                 b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}'):
        r = httpx.post(f"{server.url}/api/mcp", content=body, headers=h, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["code"] in (-32700, -32602, -32600), r.text
    # Without the version header and without a protocol version in _meta, a request is served as before.
    r = httpx.post(f"{server.url}/api/mcp", timeout=30, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                   headers={"Accept": ACCEPT, "Authorization": f"Bearer {tok}"})
    assert r.json() == {"jsonrpc": "2.0", "result": {}, "id": 1}


# --- the official SDK ------------------------------------------------------------------------------------------

async def _drive(url: str, token: str, mode: str) -> dict[str, Any]:
    """Connect the SDK's high-level Client in `mode` and call all four tools."""
    out: dict[str, Any] = {}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(f"{url}/api/mcp", http_client=http), mode=mode) as c:
            out["version"] = c.protocol_version
            out["discovered"] = c.session.discover_result is not None
            out["initialized"] = c.session.initialize_result is not None
            out["server"] = c.server_info.name if c.server_info else None
            out["tools"] = [t.name for t in (await c.list_tools()).tools]
            added = await c.call_tool("add_to_knowledge", {"text": f"Tardigrades survive vacuum ({mode}).",
                                                           "title": f"Tardigrade {mode}"})
            out["added"] = added.structured_content
            out["search"] = (await c.call_tool("search_knowledge_base", {"query": "tardigrades vacuum",
                                                                         "limit": 3})).structured_content
            assert out["added"] is not None
            out["item"] = (await c.call_tool("get_item", {"item_id": out["added"]["user_item_id"]})).structured_content
            out["recent"] = (await c.call_tool("list_recent", {"limit": 3})).structured_content
            missing = await c.call_tool("get_item", {"item_id": str(uuid.uuid4())})
            out["missing"] = (missing.is_error, missing.content[0].text if missing.content else "")
            try:
                await c.call_tool("search_knowledge_base", {"query": ""})
            except MCPError as exc:
                out["invalid"] = exc.error.code
    return out


def _methods_received(admin, user_id: uuid.UUID, last: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The MCP methods the server logged for a user, once the activity log holds `last` (it flushes in batches)."""
    deadline = time.monotonic() + 15
    methods: list[str] = []
    while time.monotonic() < deadline:
        methods = [r.method for r in admin.sql(
            "SELECT method FROM activity WHERE user_id = :u AND surface = 'mcp' ORDER BY id", u=user_id)]
        if last in methods:
            break
        time.sleep(0.2)
    return methods


def _check_session(out: dict[str, Any], mode: str) -> None:
    assert out["server"] == "lev" and out["tools"] == TOOL_NAMES
    assert out["added"]["status"] == "ready" and out["item"]["title"] == f"Tardigrade {mode}"
    assert out["search"]["results"][0]["item_id"] == out["added"]["user_item_id"]
    assert out["recent"]["items"][0]["id"] == out["added"]["user_item_id"]
    assert out["missing"][0] is True and "not_found" in out["missing"][1]
    assert out["invalid"] == -32602


def test_sdk_client_speaks_2026_07_28_without_falling_back(server, user, admin) -> None:
    out = asyncio.run(asyncio.wait_for(_drive(server.url, user.token(write=True), "auto"), 120))
    assert out["version"] == MODERN and out["discovered"] and not out["initialized"]
    _check_session(out, "auto")
    seen = _methods_received(admin, user.id, "tools/call list_recent")
    assert seen[0] == "server/discover" and "initialize" not in seen and "notifications/initialized" not in seen
    assert {"tools/call add_to_knowledge", "tools/call search_knowledge_base", "tools/call get_item"} <= set(seen)


def test_sdk_client_pinned_to_2025_11_25(server, user, admin) -> None:
    out = asyncio.run(asyncio.wait_for(_drive(server.url, user.token(write=True), "legacy"), 120))
    assert out["version"] == "2025-11-25" and out["initialized"] and not out["discovered"]
    _check_session(out, "legacy")
    seen = _methods_received(admin, user.id, "tools/call list_recent")
    assert seen[0] == "initialize" and "server/discover" not in seen
