"""No input crashes a request: hostile JSON (deep nesting, lone surrogates, NUL, huge numbers, huge strings) in
every REST body and MCP message is a 400 invalid_body (MCP: -32602, or -32700 when it is not JSON at all) and
changes nothing; chunked request bodies are read like any other, under the same size cap."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.stack import LiveServer, User, make_item, new_user

HOLE = "__hostile__"
CAP = 2 * 1024 * 1024

# Raw JSON fragments, each refused wherever it appears.
HOSTILE = [
    "[" * 1000 + "]" * 1000,
    "[" * 100_000 + "]" * 100_000,
    '{"a":' * 40 + "1" + "}" * 40,
    "[" * 33 + '"x"' + "]" * 33,
    '"\\ud800"',
    '"lone low \\udc00 here"',
    '"reversed \\udc00\\ud800 pair"',
    '{"\\ud800": 1}',
    '"a\\u0000b"',
    '{"a\\u0000": 1}',
    "1" * 5000,
    "-" + "9" * 30,
    "18446744073709551616",
    "1e999",
    "-1e400",
    "NaN",
    "Infinity",
    '"' + "a" * 1_500_000 + '"',
]


def fill(template: dict[str, Any], field: str | None, fragment: str) -> bytes:
    if field is None:
        return fragment.encode()
    body = dict(template)
    body[field] = HOLE
    return json.dumps(body).replace(json.dumps(HOLE), fragment, 1).encode()


class World:
    def __init__(self, server: LiveServer, user: User) -> None:
        self.user = user
        self.folder = user.folder("kept")
        self.item = make_item(user, folders=[self.folder], title="kept item")
        self.token = user.token(write=True)
        self.rest = httpx.Client(base_url=server.url, timeout=120,
                                 headers={"Authorization": f"Bearer {self.token}",
                                          "Content-Type": "application/json"})
        self.mcp = httpx.Client(base_url=server.url, timeout=120,
                                headers={"Authorization": f"Bearer {self.token}",
                                         "Content-Type": "application/json",
                                         "Accept": "application/json, text/event-stream"})

    def rest_targets(self) -> list[tuple[str, dict[str, Any], list[str | None]]]:
        pdf = {"mime": "application/pdf", "size": 10, "filename": "a.pdf"}
        return [
            ("/api/v1/folders", {"name": "new"}, ["name", None]),
            ("/api/v1/ingest", {"kind": "text", "text": "hello", "title": "t"}, ["kind", "text", "title", None]),
            ("/api/v1/ingest", {"kind": "url", "url": "http://127.0.0.1:9/x"}, ["url"]),
            ("/api/v1/items/bulk-delete", {"ids": [self.item]}, ["ids"]),
            (f"/api/v1/items/{self.item}/folders", {"folder_ids": [self.folder]}, ["folder_ids"]),
            ("/api/v1/uploads/signed-url", pdf, ["mime", "size", "filename"]),
            ("/api/v1/uploads/finalize-document", {**pdf, "path": "uploads/x/y/a.pdf", "title": "t"},
             ["path", "size", "title"]),
        ]

    def mcp_targets(self) -> list[tuple[str, dict[str, Any], list[str]]]:
        return [
            ("search_knowledge_base", {"query": "kept", "limit": 3}, ["query", "limit", "mode"]),
            ("get_item", {"item_id": self.item}, ["item_id"]),
            ("list_recent", {"limit": 5}, ["limit"]),
            ("add_to_knowledge", {"text": "hello", "title": "t"}, ["text", "title", "url"]),
        ]

    def state(self) -> tuple[Any, ...]:
        a = self.user.admin
        return (
            a.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=self.user.id)[0][0],
            a.sql("SELECT count(*) FROM folders WHERE user_id = :u", u=self.user.id)[0][0],
            a.sql("SELECT count(*) FROM item_folders WHERE item_id = :i", i=self.item)[0][0],
            a.sql("SELECT count(*) FROM uploads WHERE user_id = :u", u=self.user.id)[0][0],
        )

    def post_rest(self, path: str, raw: bytes) -> None:
        r = self.rest.post(path, content=raw)
        if len(raw) > CAP:
            assert r.status_code == 413 and r.json()["error"] == "file_too_large", (path, r.text[:300])
            return
        assert r.status_code == 400, (path, raw[:120], r.status_code, r.text[:300])
        assert r.json()["error"] == "invalid_body" and r.json()["message"], r.text[:300]

    def post_mcp(self, raw: bytes, *, whole: bool = False) -> None:
        """`whole`: the fragment is the whole message; JSON that is no request at all is -32600."""
        r = self.mcp.post("/api/mcp", content=raw)
        if len(raw) > CAP:
            assert r.status_code == 413, r.text[:300]
            return
        assert r.status_code == 200, (raw[:120], r.status_code, r.text[:300])
        body = r.json()
        assert body["jsonrpc"] == "2.0" and "result" not in body, (raw[:120], r.text[:300])
        assert body["error"]["code"] in ((-32600, -32602, -32700) if whole else (-32602, -32700)), r.text[:300]
        assert body["error"]["code"] == -32600 or body["error"]["data"]["error"] == "invalid_body", r.text[:300]

    def call(self, name: str, arguments: dict[str, Any], field: str, fragment: str) -> bytes:
        args = dict(arguments)
        args[field] = HOLE
        msg = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": args}}
        return json.dumps(msg).replace(json.dumps(HOLE), fragment, 1).encode()


@pytest.fixture(scope="module")
def world(server: LiveServer, admin: Any) -> Iterator[World]:
    w = World(server, new_user(admin))
    yield w
    w.rest.close()
    w.mcp.close()


@pytest.mark.parametrize("fragment", HOSTILE, ids=lambda f: f[:24] + (f"…{len(f)}" if len(f) > 24 else ""))
def test_every_rest_body_refuses_hostile_json_and_changes_nothing(world: World, fragment: str) -> None:
    before = world.state()
    for path, template, fields in world.rest_targets():
        for field in fields:
            world.post_rest(path, fill(template, field, fragment))
    assert world.state() == before


@pytest.mark.parametrize("fragment", HOSTILE, ids=lambda f: f[:24] + (f"…{len(f)}" if len(f) > 24 else ""))
def test_every_mcp_message_refuses_hostile_json_and_changes_nothing(world: World, fragment: str) -> None:
    before = world.state()
    for name, arguments, fields in world.mcp_targets():
        for field in fields:
            world.post_mcp(world.call(name, arguments, field, fragment))
    world.post_mcp(fragment.encode(), whole=True)
    world.post_mcp(fill({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, "params", fragment), whole=True)
    if not fragment.startswith('"aaaa'):  # a long string is a fine id
        world.post_mcp(fill({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": "list_recent"}}, "id", fragment), whole=True)
    assert world.state() == before


def _poison(draw: Any) -> str:
    """One generated hostile JSON fragment."""
    kind = draw(st.sampled_from(["deep", "surrogate", "nul", "bigint", "bigfloat"]))
    if kind == "deep":
        depth = draw(st.integers(33, 3000))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"k":', "}")]))
        inner = draw(st.sampled_from(["1", '"x"', "[]", "{}", "null"]))
        return opener * depth + inner + closer * depth
    if kind in ("surrogate", "nul"):
        text = draw(st.text(st.characters(codec="utf-8", exclude_characters='"\\'), max_size=30))
        at = draw(st.integers(0, len(text)))
        bad = "\\u0000" if kind == "nul" else "\\u" + format(draw(st.integers(0xD800, 0xDFFF)), "04x")
        return '"' + text[:at] + bad + text[at:] + '"'
    if kind == "bigint":
        digits = draw(st.integers(20, 6000))
        return draw(st.sampled_from(["", "-"])) + "9" * digits
    return draw(st.sampled_from(["1e", "-1e", "9.5e"])) + str(draw(st.integers(309, 100_000)))


@st.composite
def poisons(draw: Any) -> str:
    return _poison(draw)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(fragment=poisons(), pick=st.integers(0, 10_000), surface=st.sampled_from(["rest", "mcp"]))
@example(fragment='"\\ud83d"', pick=0, surface="rest")
@example(fragment='"\\ude00\\ud83d"', pick=1, surface="mcp")
def test_fuzz_hostile_values_anywhere(world: World, fragment: str, pick: int, surface: str) -> None:
    before = world.state()
    if surface == "rest":
        targets = [(p, t, f) for p, t, fields in world.rest_targets() for f in fields]
        path, template, field = targets[pick % len(targets)]
        world.post_rest(path, fill(template, field, fragment))
    else:
        calls = [(n, a, f) for n, a, fields in world.mcp_targets() for f in fields]
        name, arguments, field = calls[pick % len(calls)]
        world.post_mcp(world.call(name, arguments, field, fragment))
    assert world.state() == before


def _chunks(raw: bytes, size: int = 1000) -> Iterator[bytes]:
    for i in range(0, len(raw), size):
        yield raw[i:i + size]


def test_chunked_rest_body_is_accepted(world: World) -> None:
    raw = json.dumps({"kind": "text", "text": "A chunked note about chunked transfer encoding " * 40}).encode()
    r = world.rest.post("/api/v1/ingest", content=_chunks(raw))
    assert r.request.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.request.headers
    assert r.status_code == 200, r.text
    got = world.rest.get(f"/api/v1/items/{r.json()['user_item_id']}").json()
    assert got["status"] == "ready" and got["text"].startswith("A chunked note")
    world.rest.delete(f"/api/v1/items/{r.json()['user_item_id']}")
    r = world.rest.post("/api/v1/folders", content=_chunks(json.dumps({"name": "chunked"}).encode(), 3))
    assert r.status_code == 201, r.text
    world.rest.delete(f"/api/v1/folders/{r.json()['id']}")


def test_chunked_body_over_the_cap_is_413_and_stores_nothing(world: World) -> None:
    before = world.state()
    raw = json.dumps({"name": "x" * (CAP + 10)}).encode()  # (/ingest has a larger cap: a captured page's HTML)
    r = world.rest.post("/api/v1/folders", content=_chunks(raw, 65536))
    assert r.status_code == 413, r.text[:300]
    assert r.json() == {"error": "file_too_large", "message": r.json()["message"], "maxBytes": CAP}
    assert world.state() == before


def test_chunked_hostile_body_is_still_refused(world: World) -> None:
    r = world.rest.post("/api/v1/folders", content=_chunks(b'{"name": "\\ud800"}', 4))
    assert r.status_code == 400 and r.json()["error"] == "invalid_body", r.text


def test_chunked_mcp_message_is_answered(world: World) -> None:
    msg = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
           "params": {"name": "get_item", "arguments": {"item_id": world.item}}}
    r = world.mcp.post("/api/mcp", content=_chunks(json.dumps(msg).encode(), 7))
    assert r.status_code == 200 and r.json()["result"]["structuredContent"]["id"] == world.item, r.text


def test_unknown_item_id_in_chunked_body_path_is_still_404(world: World) -> None:
    r = world.rest.post(f"/api/v1/items/{uuid.uuid4()}/folders",
                        content=_chunks(json.dumps({"folder_ids": [world.folder]}).encode(), 5))
    assert r.status_code == 404 and r.json()["error"] == "not_found", r.text


def test_bodies_without_content_type_are_read_as_json(server: LiveServer, world: World) -> None:
    """The adversarial pass: a chunked ingest with no Content-Type reached the handler as bytes (500)."""
    bare = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {world.token}"}, timeout=120)
    raw = json.dumps({"kind": "text", "text": "no content type at all"}).encode()
    for content in (raw, _chunks(raw, 9)):
        r = bare.post("/api/v1/ingest", content=content)
        assert "content-type" not in r.request.headers
        assert r.status_code == 200, r.text
        bare.delete(f"/api/v1/items/{r.json()['user_item_id']}")
    r = bare.post("/api/v1/folders", content=b"not json")
    assert r.status_code == 400 and r.json()["error"] == "invalid_body", r.text
