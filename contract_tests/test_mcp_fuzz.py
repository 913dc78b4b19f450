"""Fuzzing the MCP surface (POST /api/mcp) from mcp_tools.json: valid arguments generated from each tool's
inputSchema, invalid ones (wrong types, unknown keys, non-objects), unknown tools, and malformed JSON-RPC
envelopes. Never a 5xx, never -32603 for bad input, always a well-formed JSON-RPC 2.0 answer, the mapped codes
on errors, and results that match the tool's outputSchema."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from contract_tests.conftest import Library, count_case, examples
from contract_tests.test_rest_schemathesis import _tame_url
from lev.errors import MCP_TOOL_ERRORS
from lev.openapi import mcp_tools

TOOLS = {t["name"]: t for t in mcp_tools()["tools"]}
ACCEPT = "application/json, text/event-stream"
INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL, PARSE_ERROR, CUSTOM = (
    -32600, -32601, -32602, -32603, -32700, -32605)
ERROR_CODES = {INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL, PARSE_ERROR, CUSTOM}
FUZZ = settings(max_examples=examples(), deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)


class Mcp:
    def __init__(self, base: str, token: str | None) -> None:
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.client = httpx.Client(base_url=base, headers=headers, timeout=120)
        self.next_id = 0

    def post(self, content: bytes) -> httpx.Response:
        return self.client.post("/api/mcp", content=content)

    def call(self, name: Any, arguments: Any) -> tuple[httpx.Response, dict[str, Any]]:
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}}
        r = self.post(json.dumps(msg).encode())
        return r, envelope(r, self.next_id)


def envelope(r: httpx.Response, req_id: Any = ...) -> dict[str, Any]:
    """Check one JSON-RPC 2.0 response over HTTP and return it."""
    assert r.status_code < 500, (r.status_code, r.text)
    assert r.headers.get("x-request-id")
    body = r.json()
    assert isinstance(body, dict), body
    assert body.get("jsonrpc") == "2.0", body
    assert ("result" in body) != ("error" in body), body
    assert "id" in body, body
    if req_id is not ...:
        assert body["id"] == req_id or ("error" in body and body["id"] is None), (req_id, body)
    if "error" in body:
        e = body["error"]
        assert isinstance(e, dict) and isinstance(e.get("code"), int) and isinstance(e.get("message"), str), body
        assert e["code"] in ERROR_CODES, body
        assert r.status_code in {200, 401, 400, 403}, (r.status_code, body)
        if r.status_code == 200:
            assert e["code"] != INTERNAL, body  # bad input is never an internal error
    else:
        assert r.status_code == 200
    return body


def check_tool_answer(name: str, body: dict[str, Any]) -> str:
    """A tools/call answer: an outputSchema-conforming result, a tool error (isError), or a mapped RPC error.
    Returns "ok", "tool_error" or the error code's name."""
    if "error" in body:
        e = body["error"]
        data = e.get("data") or {}
        if e["code"] == INVALID_PARAMS:
            assert data.get("error") in {"invalid_body", "invalid_id", None}, body
            return "invalid_params"
        assert e["code"] == CUSTOM, body
        assert data.get("error") in {"capability_denied", "forbidden_scope", "quota_exceeded", "rate_limited",
                                     "payment_required"}, body
        return data["error"]
    result = body["result"]
    assert isinstance(result.get("content"), list) and result["content"][0]["type"] == "text", result
    if result.get("isError"):
        text = result["content"][0]["text"]
        assert any(f"(error: {code})" in text for code in MCP_TOOL_ERRORS), text
        return "tool_error"
    structured = result["structuredContent"]
    assert isinstance(structured, dict)
    jsonschema.validate(structured, TOOLS[name]["outputSchema"])
    assert json.loads(result["content"][0]["text"]) == structured
    return "ok"


@pytest.fixture(scope="module")
def mcp(server, library: Library) -> dict[str, Mcp]:  # type: ignore[no-untyped-def]
    return {kind: Mcp(server.url, tok) for kind, tok in library.tokens.items()}


# --- valid arguments ------------------------------------------------------------------------------------------

def _value(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if schema.get("format") == "uuid":
        return st.uuids().map(str)
    return from_schema({k: v for k, v in schema.items() if k not in {"description", "default"}})


def valid_arguments(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects valid against a tool's inputSchema (flat objects, additionalProperties false). Built per
    property: hypothesis-jsonschema 0.23's own object strategy breaks on this Hypothesis version."""
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    return st.fixed_dictionaries({k: _value(props[k]) for k in sorted(required)},
                                 optional={k: _value(v) for k, v in props.items() if k not in required})


def _tame_args(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "add_to_knowledge" and isinstance(args.get("url"), str):
        args = {**args, "url": _tame_url(args["url"])}
    return args


@pytest.mark.parametrize("name", sorted(TOOLS))
@pytest.mark.parametrize("kind", ["whole_write", "whole_read", "one_folder", "two_folder"])
def test_valid_arguments(mcp: dict[str, Mcp], name: str, kind: str) -> None:
    tool = TOOLS[name]

    @FUZZ
    @given(args=valid_arguments(tool["inputSchema"]))
    def run(args: dict[str, Any]) -> None:
        count_case("mcp valid arguments")
        _, body = mcp[kind].call(name, _tame_args(name, args))
        outcome = check_tool_answer(name, body)
        if "\x00" in json.dumps(args, ensure_ascii=False):  # lev.jsonguard refuses NUL before anything else
            assert outcome == "invalid_params", body
        elif tool["capability"] == "write" and kind == "whole_read":
            assert outcome == "capability_denied", body
            assert body["error"]["data"]["required"] == "write"
        elif name in {"list_recent"}:
            assert outcome == "ok", body
        elif name == "search_knowledge_base":
            assert outcome in {"ok", "invalid_params"}, body  # a query of only blanks is refused
        elif name == "get_item":
            assert outcome == "tool_error", body  # random UUIDs are never found
        elif "folder_id" in args and kind in {"one_folder", "two_folder"}:  # a random folder is out of scope
            assert outcome in {"forbidden_scope", "invalid_params"}, body
        else:
            assert outcome in {"ok", "tool_error", "invalid_params"}, body  # neither/both of url, text

    run()


# --- invalid arguments ----------------------------------------------------------------------------------------

def _wrong_type(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    return json_values.filter(lambda v: not _valid(prop, v))


def _valid(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).is_valid(value)


def invalid_arguments(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    props: dict[str, Any] = schema.get("properties", {})
    base = valid_arguments(schema)
    mutated_field = st.sampled_from(sorted(props)).flatmap(
        lambda key: st.tuples(base, st.just(key), _wrong_type(props[key]))
    ).map(lambda t: {**t[0], t[1]: t[2]})
    extra_key = st.tuples(base, st.text(min_size=1, max_size=12).filter(lambda k: k not in props), json_values) \
        .map(lambda t: {**t[0], t[1]: t[2]})
    not_an_object = json_values.filter(lambda v: not isinstance(v, dict) and v is not None)
    missing_required = base.map(lambda a: {k: v for k, v in a.items() if k not in schema.get("required", [])}) \
        if schema.get("required") else st.nothing()
    return st.one_of(mutated_field, extra_key, not_an_object, missing_required).filter(
        lambda a: not _valid(schema, a))


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_invalid_arguments_are_invalid_params(mcp: dict[str, Mcp], name: str) -> None:
    tool = TOOLS[name]

    @FUZZ
    @given(args=invalid_arguments(tool["inputSchema"]))
    def run(args: Any) -> None:
        count_case("mcp invalid arguments")
        r, body = mcp["whole_write"].call(name, args)
        assert r.status_code == 200
        assert "error" in body and body["error"]["code"] == INVALID_PARAMS, (args, body)
        assert body["error"]["data"]["error"] == "invalid_body"

    run()


@FUZZ
@given(name=json_values.filter(lambda n: not isinstance(n, str) or n not in TOOLS), args=json_values)
def test_unknown_tools_are_invalid_params(mcp: dict[str, Mcp], name: Any, args: Any) -> None:
    count_case("mcp unknown tools")
    _, body = mcp["whole_read"].call(name, args)
    assert "error" in body and body["error"]["code"] == INVALID_PARAMS, body


# --- malformed envelopes --------------------------------------------------------------------------------------

envelopes = st.one_of(
    json_values,  # any JSON at all
    st.fixed_dictionaries({}, optional={
        "jsonrpc": st.one_of(st.just("2.0"), json_values), "id": json_values,
        "method": st.one_of(st.sampled_from(["initialize", "ping", "tools/list", "tools/call", "nope",
                                             "notifications/initialized"]), json_values),
        "params": json_values,
    }),
    st.lists(st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": st.integers(), "method": st.just("ping")}),
             max_size=3),
)


@FUZZ
@given(msg=envelopes)
def test_malformed_envelopes(mcp: dict[str, Mcp], msg: Any) -> None:
    count_case("mcp envelopes")
    r = mcp["whole_read"].post(json.dumps(msg).encode())
    assert r.status_code < 500, (msg, r.status_code, r.text)
    if r.status_code == 202:
        assert not r.content  # a notification
        return
    body = r.json()
    answers = body if isinstance(body, list) else [body]
    for answer in answers:
        assert answer.get("jsonrpc") == "2.0" and ("result" in answer) != ("error" in answer), (msg, body)
        if "error" in answer:
            assert answer["error"]["code"] in ERROR_CODES - {INTERNAL}, (msg, body)


@FUZZ
@given(raw=st.binary(max_size=200).filter(lambda b: not _is_json(b)))
def test_unparseable_bodies_are_parse_errors(mcp: dict[str, Mcp], raw: bytes) -> None:
    count_case("mcp unparseable bodies")
    r = mcp["whole_read"].post(raw)
    body = envelope(r)
    assert r.status_code == 200 and body["error"]["code"] == PARSE_ERROR, body


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return False
    return True


def test_fixed_protocol_cases(mcp: dict[str, Mcp], server) -> None:  # type: ignore[no-untyped-def]
    """The mapped codes the fuzzers above cannot reach by chance."""
    c = mcp["whole_read"]
    r = Mcp(server.url, None).post(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
    assert r.status_code == 401 and r.headers["www-authenticate"].lower().startswith("bearer")
    assert envelope(r)["error"]["code"] == INVALID_REQUEST
    r = Mcp(server.url, "lev_" + "x" * 43).post(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
    assert r.status_code == 401 and envelope(r)["error"]["code"] == INVALID_REQUEST
    assert envelope(c.post(b'{"jsonrpc": "2.0", "id": 7, "method": "nope"}'), 7)["error"]["code"] == METHOD_NOT_FOUND
    assert envelope(c.post(b'{"jsonrpc": "2.0", "id": 8, "method": "ping"}'), 8)["result"] == {}
    assert envelope(c.post(b'{"jsonrpc": "1.0", "id": 9, "method": "ping"}'))["error"]["code"] == INVALID_REQUEST
    assert envelope(c.post(b'{"jsonrpc": "2.0", "id": 9'))["error"]["code"] == PARSE_ERROR
    assert c.post(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}').status_code == 202
    listed = envelope(c.post(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}'), 3)["result"]["tools"]
    assert {t["name"] for t in listed} == set(TOOLS)
    _, body = c.call("add_to_knowledge", {"text": "hello"})
    assert body["error"]["code"] == CUSTOM and body["error"]["data"]["error"] == "capability_denied"
    assert body["error"]["data"]["have"] == ["read"]
