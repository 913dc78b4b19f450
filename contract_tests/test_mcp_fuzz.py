"""Fuzzing the MCP surface (POST /api/mcp) from mcp_tools.json: valid arguments generated from each tool's
inputSchema, invalid ones (wrong types, unknown keys, non-objects), unknown tools, and malformed JSON-RPC
envelopes, under the initialize-era revisions and under 2026-07-28 (its `_meta` envelope, `server/discover` and
the `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` headers mangled at random). Never a 5xx, never -32603 for bad
input, always a well-formed JSON-RPC 2.0 answer, the mapped codes and statuses on errors, and results that match
the tool's outputSchema."""

from __future__ import annotations

import base64
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
from lev.core import jsonguard
from lev.core.contract import mcp_tools
from lev.core.errors import MCP_TOOL_ERRORS

TOOLS = {t["name"]: t for t in mcp_tools()["tools"]}
ACCEPT = "application/json, text/event-stream"
INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL, PARSE_ERROR, CUSTOM = (
    -32600, -32601, -32602, -32603, -32700, -32605)
HEADER_MISMATCH, UNSUPPORTED_VERSION, RESOURCE_NOT_FOUND = -32020, -32022, -32002
ERROR_CODES = {INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL, PARSE_ERROR, CUSTOM, HEADER_MISMATCH,
               UNSUPPORTED_VERSION, RESOURCE_NOT_FOUND}
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"}}
# The HTTP status 2026-07-28 gives a JSON-RPC error code (others travel with 200).
MODERN_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400, HEADER_MISMATCH: 400,
                 UNSUPPORTED_VERSION: 400, METHOD_NOT_FOUND: 404}
FUZZ = settings(max_examples=examples(), deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))
# The 2026-07-28 repeats of the valid-argument runs go through the same dispatch: half as many examples.
FUZZ_HALF = settings(FUZZ, max_examples=examples(0.5))

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

    def post(self, content: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
        return self.client.post("/api/mcp", content=content, headers=headers)

    def call(self, name: Any, arguments: Any, *, modern: bool = False) -> tuple[httpx.Response, dict[str, Any]]:
        """One tools/call; `modern` stamps it as a conforming 2026-07-28 client does."""
        self.next_id += 1
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        headers = None
        if modern:
            params["_meta"] = META
            headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"}
            if isinstance(name, str):
                headers["Mcp-Name"] = _header_value(name)
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": params}
        r = self.post(json.dumps(msg).encode(), headers)
        body = envelope(r, self.next_id)
        if modern:
            assert r.status_code == (MODERN_STATUS.get(body["error"]["code"], 200) if "error" in body else 200), body
            assert "error" in body or body["result"]["resultType"] == "complete", body
        return r, body


def _header_value(text: str) -> str:
    """A header value as a 2026-07-28 client writes it: as is when printable ASCII, else the base64 sentinel."""
    if text.isascii() and text.isprintable() and text == text.strip() and not text.startswith("=?base64?"):
        return text
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


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
        assert r.status_code in {200, 401, 400, 403, 404}, (r.status_code, body)
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


# Every token kind under the initialize-era revisions; under 2026-07-28 the kinds that meet the capability and
# scope errors (the dispatch is the same, so the outcomes must be too).
@pytest.mark.parametrize("name", sorted(TOOLS))
@pytest.mark.parametrize(("kind", "modern"), [("whole_write", False), ("whole_read", False), ("one_folder", False),
                                              ("two_folder", False), ("whole_read", True), ("one_folder", True)])
def test_valid_arguments(mcp: dict[str, Mcp], name: str, kind: str, modern: bool) -> None:
    tool = TOOLS[name]

    @(FUZZ_HALF if modern else FUZZ)
    @given(args=valid_arguments(tool["inputSchema"]))
    def run(args: dict[str, Any]) -> None:
        count_case("mcp valid arguments" + (" (2026-07-28)" if modern else ""))
        _, body = mcp[kind].call(name, _tame_args(name, args), modern=modern)
        outcome = check_tool_answer(name, body)
        if "\x00" in json.dumps(args, ensure_ascii=False):  # lev.core.jsonguard refuses NUL before anything else
            assert outcome == "invalid_params", body
        elif tool["capability"] == "write" and kind == "whole_read":
            assert outcome == "capability_denied", body
            assert body["error"]["data"]["required"] == "write"
        elif name in {"list_recent"}:
            assert outcome == "ok", body
        elif name == "search_knowledge_base" and ("item_id" in args or "folder_id" in args):
            # a random item or folder is never found (or, for a folder token, outside its scope)
            assert outcome in {"tool_error", "invalid_params", "forbidden_scope"}, body
            assert outcome != "tool_error" or "(error: not_found)" in body["result"]["content"][0]["text"], body
        elif name == "search_knowledge_base":
            assert outcome in {"ok", "invalid_params"}, body  # a query of only blanks is refused
        elif name == "get_item" and outcome == "invalid_params":  # a number past 64 bits is refused before all
            assert "64-bit integer" in body["error"]["message"], body
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


@pytest.mark.parametrize("modern", [False, True])
@pytest.mark.parametrize("name", sorted(TOOLS))
def test_invalid_arguments_are_invalid_params(mcp: dict[str, Mcp], name: str, modern: bool) -> None:
    tool = TOOLS[name]

    @FUZZ
    @given(args=invalid_arguments(tool["inputSchema"]))
    def run(args: Any) -> None:
        count_case("mcp invalid arguments" + (" (2026-07-28)" if modern else ""))
        r, body = mcp["whole_write"].call(name, args, modern=modern)
        assert r.status_code == (400 if modern else 200)
        assert "error" in body and body["error"]["code"] == INVALID_PARAMS, (args, body)
        assert body["error"]["data"]["error"] == "invalid_body"

    run()


@pytest.mark.parametrize("modern", [False, True])
def test_unknown_tools_are_invalid_params(mcp: dict[str, Mcp], modern: bool) -> None:
    @FUZZ
    @given(name=json_values.filter(lambda n: not isinstance(n, str) or n not in TOOLS), args=json_values)
    def run(name: Any, args: Any) -> None:
        count_case("mcp unknown tools" + (" (2026-07-28)" if modern else ""))
        _, body = mcp["whole_read"].call(name, args, modern=modern)
        assert "error" in body and body["error"]["code"] == INVALID_PARAMS, body

    run()


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


# --- 2026-07-28: the _meta envelope and the routing headers, mangled at random ---------------------------------

MODERN_METHODS = ("server/discover", "tools/list", "tools/call", "resources/list", "resources/templates/list",
                  "resources/read")
header_text = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=24).map(str.strip)
ABSENT = object()


def _or_absent(*options: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.just(ABSENT), *options)


metas = st.one_of(
    st.just(META),
    st.sampled_from(sorted(META)).map(lambda drop: {k: v for k, v in META.items() if k != drop}),
    st.tuples(st.sampled_from(sorted(META)), json_values).map(lambda kv: {**META, kv[0]: kv[1]}),
    json_values,
)
modern_requests = st.fixed_dictionaries({
    "method": st.one_of(st.sampled_from([*MODERN_METHODS, "ping", "initialize", "prompts/list", "nope"]),
                        json_values),
    "id": _or_absent(st.integers(-2**53, 2**53), st.text(max_size=8), json_values),
    "name": _or_absent(st.sampled_from(sorted(TOOLS)), st.text(max_size=12), json_values),
    "arguments": _or_absent(st.just({}), json_values),
    "extra": st.dictionaries(st.text(max_size=6), json_values, max_size=2),  # params nobody asked for
    "meta": _or_absent(metas),
    "version": _or_absent(st.sampled_from([MODERN, MODERN, "2025-11-25"]), header_text),
    "method_header": st.one_of(st.sampled_from(["same", "same", "absent", "twice"]), header_text),
    "name_header": st.one_of(st.sampled_from(["same", "same", "base64", "absent"]), header_text),
})


def _modern_message(case: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    params: dict[str, Any] = dict(case["extra"])
    for key, field in (("name", "name"), ("arguments", "arguments"), ("meta", "_meta")):
        if case[key] is not ABSENT:
            params[field] = case[key]
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": case["method"], "params": params}
    if case["id"] is not ABSENT:
        msg["id"] = case["id"]
    headers: list[tuple[str, str]] = []
    if case["version"] is not ABSENT:
        headers.append(("MCP-Protocol-Version", case["version"]))
    method = case["method"] if isinstance(case["method"], str) else "tools/call"
    if case["method_header"] in ("same", "twice"):
        headers += [("Mcp-Method", _header_value(method))] * (2 if case["method_header"] == "twice" else 1)
    elif case["method_header"] != "absent":
        headers.append(("Mcp-Method", case["method_header"]))
    name = case["name"] if isinstance(case["name"], str) else "search_knowledge_base"
    if case["name_header"] == "same":
        headers.append(("Mcp-Name", _header_value(name)))
    elif case["name_header"] == "base64":
        headers.append(("Mcp-Name", "=?base64?" + base64.b64encode(name.encode("utf-8")).decode("ascii") + "?="))
    elif case["name_header"] != "absent":
        headers.append(("Mcp-Name", case["name_header"]))
    return msg, headers


@FUZZ
@given(case=modern_requests)
def test_2026_meta_and_headers(mcp: dict[str, Mcp], case: dict[str, Any]) -> None:
    """Whatever the envelope and the headers: never a 5xx, a well-formed answer, the revision's status for its
    code, `resultType` on its results, and a conforming request to a read method always answered."""
    count_case("mcp 2026-07-28 envelopes and headers")
    msg, headers = _modern_message(case)
    r = mcp["whole_read"].client.post("/api/mcp", content=json.dumps(msg).encode(), headers=headers)
    assert r.status_code < 500, (msg, headers, r.status_code, r.text)
    if r.status_code == 202:
        assert not r.content and "id" not in msg, (msg, headers)
        return
    body = envelope(r)
    version = case["version"]
    if "error" in body:
        code = body["error"]["code"]
        assert code != INTERNAL, body
        if code == UNSUPPORTED_VERSION:
            assert version not in (MODERN, "2025-11-25", "2025-06-18", "2025-03-26"), (version, body)
        if version == MODERN or code in (HEADER_MISMATCH, UNSUPPORTED_VERSION):
            assert r.status_code == MODERN_STATUS.get(code, 200), (msg, headers, r.status_code, body)
    else:
        assert r.status_code == 200
        if version == MODERN:
            assert body["result"]["resultType"] == "complete", body
    conforming = (version == MODERN and case["meta"] == META and case["method_header"] == "same"
                  and case["method"] in ("server/discover", "tools/list") and "id" in msg
                  and isinstance(msg["id"], (int, str)) and not isinstance(msg["id"], bool) and _accepted(msg))
    if conforming:
        assert "result" in body and body["id"] == msg["id"], (msg, headers, body)


def _accepted(msg: Any) -> bool:
    """Whether lev.core.jsonguard takes the body (else it is refused with -32602 before anything else)."""
    try:
        jsonguard.loads(json.dumps(msg))
    except jsonguard.BadJson:
        return False
    return True


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


# --- resources/read of item URIs (issue 52) -------------------------------------------------------------------

def _item_uris(library: Library) -> st.SearchStrategy[str]:
    known = sorted(library.items.values())
    ids = st.one_of(st.sampled_from(known), st.uuids().map(str), st.text(max_size=40))
    query = st.one_of(st.just(""), st.integers(-5, 2**70).map(lambda n: f"?offset={n}"), st.text(max_size=20).map(
        lambda q: "?" + q))
    return st.builds(lambda scheme, i, q: f"{scheme}://items/{i}{q}", st.sampled_from(["lev", "lev", "LEV", "ui"]),
                     ids, query)


@pytest.mark.parametrize("kind", ["whole_read", "one_folder"])
def test_reading_item_uris(mcp: dict[str, Mcp], library: Library, kind: str) -> None:
    """Any item URI: a page of a visible item's text within the budget, -32002 for what is not there or out of
    scope, -32602 for a bad offset; never a 5xx or -32603."""

    @FUZZ
    @given(uri=_item_uris(library))
    def read(uri: str) -> None:
        count_case(f"mcp resources/read [{kind}]")
        r = mcp[kind].post(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                                       "params": {"uri": uri}}).encode())
        body = envelope(r, 1)
        assert len(r.content) <= 64 * 1024, len(r.content)
        if "error" in body:
            assert body["error"]["code"] in {RESOURCE_NOT_FOUND, INVALID_PARAMS}, (uri, body)
        else:
            (content,) = body["result"]["contents"]
            assert content["uri"] == uri and isinstance(content["text"], str), (uri, body)

    read()
