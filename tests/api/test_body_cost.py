"""No JSON body stalls the server or costs more than its size justifies (issue 32): a 1.8 MB array of integers sent
by any token, a 2 MB body sent to sign-in without credentials, an MCP call with a million arguments are refused
at once with a short 400 (the error quotes an excerpt, never the body), and /healthz keeps answering meanwhile.
Every array a request takes has a documented maxItems."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from lev.core.contract import load_spec, mcp_tools
from tests.stack import User, make_item

INTS = "[" + ",".join(["1"] * 900_000) + "]"  # 1.8 MB
NESTED = "[" + ",".join(["[[[1]]]"] * 200_000) + "]"  # 1.6 MB
EMPTY_OBJECTS = "[" + ",".join(["{}"] * 600_000) + "]"  # 1.8 MB


def probe_while(server_url: str, work: Callable[[], Any]) -> tuple[Any, list[float]]:
    """Run `work` in a thread while /healthz is asked every 10 ms; its result and the probes' latencies."""
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.setdefault("result", work()))
    latencies: list[float] = []
    with httpx.Client(base_url=server_url, timeout=60) as probe:
        probe.get("/healthz")
        thread.start()
        while thread.is_alive():
            started = time.perf_counter()
            assert probe.get("/healthz").status_code == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.01)
    thread.join()
    return out.get("result"), latencies


def refused_quickly(server_url: str, send: Callable[[], httpx.Response]) -> httpx.Response:
    started = time.perf_counter()
    r, latencies = probe_while(server_url, send)
    took = time.perf_counter() - started
    # before: 27 s for the bulk-delete body (every other request waited as long); the quick answer's latency is
    # bench-hostile's (a 3 s budget here failed on a busy machine)
    assert took < 20, took
    assert len(r.content) < 2000, r.content[:300]  # before: the 1.8 MB array came back in the message
    return r


def test_hostile_rest_bodies_are_refused_at_once_with_a_short_400(server, user: User) -> None:
    item = make_item(user, title="kept")
    c = httpx.Client(base_url=server.url, timeout=120, headers={"Authorization": f"Bearer {user.token(write=True)}",
                                                                "Content-Type": "application/json"})
    for body in (f'{{"ids": {INTS}}}', f'{{"ids": {NESTED}}}', f'{{"ids": {EMPTY_OBJECTS}}}', INTS):
        r = refused_quickly(server.url, lambda b=body: c.post("/api/v1/items/bulk-delete", content=b))
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", r.text
        assert "more than 10000 values" in r.json()["message"], r.text
    assert c.get(f"/api/v1/items/{item}").status_code == 200  # nothing was deleted


def test_a_large_invalid_array_is_answered_with_its_size_not_its_values(server, user: User) -> None:
    c = httpx.Client(base_url=server.url, timeout=120, headers={"Authorization": f"Bearer {user.token(write=True)}"})
    r = c.post("/api/v1/items/bulk-delete", json={"ids": list(range(5000))})
    assert r.status_code == 400, r.text
    message = r.json()["message"]
    assert message.startswith("IDs must have at most") and "(it has 5000)" in message and "0, 1" not in message, message
    r = c.post("/api/v1/items/bulk-delete", json={"ids": ["x" * 1500] * 50})
    assert r.status_code == 400 and len(r.json()["message"]) < 400, r.text


def test_sign_in_with_a_2mb_body_and_no_credentials_is_refused_at_once(server) -> None:
    c = httpx.Client(base_url=server.url, timeout=120, headers={"Content-Type": "application/json"})
    for body in (f'{{"email": {INTS[:1_900_000].rsplit(",", 1)[0]}]}}', f'{{"password": {NESTED}}}',
                 f'{{"x": {EMPTY_OBJECTS}}}'):
        r = refused_quickly(server.url, lambda b=body: c.post("/api/account/login", content=b))
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", r.text


def test_an_mcp_call_with_a_million_arguments_is_refused_at_once(server, user: User) -> None:
    c = httpx.Client(base_url=server.url, timeout=120, headers={
        "Authorization": f"Bearer {user.token(write=True)}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream"})
    call = '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_recent", "arguments": '
    for args in (f'{{"limit": {INTS}}}', f'{{"limit": 1, "x": {EMPTY_OBJECTS}}}'):
        r = refused_quickly(server.url, lambda a=args: c.post("/api/mcp", content=call + a + "}}"))
        assert r.status_code == 200 and r.json()["error"]["code"] == -32602, r.text
    big = {"limit": 1, **{f"k{i}": i for i in range(2000)}}  # within the bound: refused for its extra arguments
    r = c.post("/api/mcp", json={"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                                 "params": {"name": "list_recent", "arguments": big}})
    assert r.json()["error"]["code"] == -32602 and len(r.text) < 2000, r.text[:500]


def _arrays_without_max_items(schema: Any, spec: dict[str, Any], where: str) -> list[str]:
    while isinstance(schema, dict) and "$ref" in schema:
        node: Any = spec
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    if not isinstance(schema, dict):
        return []
    found = []
    types = schema.get("type")
    if (types == "array" or isinstance(types, list) and "array" in types) and "maxItems" not in schema:
        found.append(where)
    children = [(schema.get("items"), f"{where}[]")] if "items" in schema else []
    children += [(v, f"{where}.{k}") for k, v in (schema.get("properties") or {}).items()]
    children += [(v, f"{where}|{i}") for k in ("oneOf", "anyOf", "allOf") for i, v in enumerate(schema.get(k, []))]
    if isinstance(schema.get("additionalProperties"), dict):
        children.append((schema["additionalProperties"], f"{where}.*"))
    for child, at in children:
        found += _arrays_without_max_items(child, spec, at)
    return found


def test_every_array_a_request_takes_has_a_max_items() -> None:
    spec = load_spec()
    missing: list[str] = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            for param in [*item.get("parameters", []), *op.get("parameters", [])]:
                missing += _arrays_without_max_items(param, spec, f"{method} {path} parameter")
            for media, content in (op.get("requestBody") or {}).get("content", {}).items():
                missing += _arrays_without_max_items(content.get("schema", {}), spec, f"{method} {path} {media}")
    for tool in mcp_tools()["tools"]:
        missing += _arrays_without_max_items(tool["inputSchema"], spec, f"MCP {tool['name']}")
    assert not missing, missing
    assert json.dumps(spec).count('"maxItems"') >= 3
