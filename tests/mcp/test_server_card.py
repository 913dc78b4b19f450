"""The Server Card (`/.well-known/mcp/server-card.json`, and `/api/mcp/server-card` where the card's draft now
recommends it) and the checkout's `server.json` for the MCP Registry are true: their shape is the one the formats
publish (the Server Card extension's `v1` schema, the Registry's 2025-12-11 schema: the rules they state are
restated below), and every fact they give is what the running server says of itself (version, title, the endpoint
that answers, the revisions `server/discover` lists, a token needed)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema

from lev.core.packagedata import VERSION
from lev.mcp import card
from tests.mcp.test_mcp import rpc
from tests.mcp.test_mcp_revisions import modern
from tests.stack import ROOT, User

NAME = {"type": "string", "minLength": 3, "maxLength": 200, "pattern": "^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$"}
TEXT_100 = {"type": "string", "minLength": 1, "maxLength": 100}
INPUT = {"type": "object", "properties": {
    "description": {"type": "string"}, "isRequired": {"type": "boolean"}, "isSecret": {"type": "boolean"},
    "value": {"type": "string"}, "default": {"type": "string"}}}
HEADER = {**INPUT, "required": ["name"], "properties": {**INPUT["properties"], "name": {"type": "string"},
                                                         "variables": {"additionalProperties": INPUT}}}
CARD = {"type": "object", "required": ["$schema", "name", "version", "description"], "properties": {
    "$schema": {"const": "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"},
    "name": NAME, "title": TEXT_100, "description": TEXT_100, "version": {"type": "string", "maxLength": 255},
    "websiteUrl": {"type": "string", "format": "uri"},
    "remotes": {"type": "array", "items": {"type": "object", "required": ["type", "url"], "properties": {
        "type": {"enum": ["sse", "streamable-http"]},
        "url": {"type": "string", "pattern": r"^(https?://[^\s]+|\{[a-zA-Z_][a-zA-Z0-9_]*\}[^\s]*)$"},
        "headers": {"type": "array", "items": HEADER},
        "supportedProtocolVersions": {"type": "array", "items": {"type": "string"}}}}}},
    "not": {"required": ["packages"]}}  # a card describes remote connections only
REGISTRY = {"type": "object", "required": ["name", "description", "version"], "properties": {
    "$schema": {"const": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"},
    "name": NAME, "title": TEXT_100, "description": TEXT_100, "version": {"type": "string", "maxLength": 255},
    "remotes": {"type": "array", "items": {"type": "object", "required": ["type", "url"], "properties": {
        "type": {"enum": ["streamable-http", "sse"]}, "url": {"type": "string", "pattern": r"^https?://[^\s]+$"},
        "headers": {"type": "array", "items": HEADER}, "variables": {"additionalProperties": INPUT}}}}}}


def _valid(doc: dict[str, Any], schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).validate(doc)


def test_the_card_is_public_well_formed_and_says_what_the_server_says(server, user: User) -> None:
    cards = [httpx.get(f"{server.url}{path}") for path in card.PATHS]
    for r in cards:
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json"), r.text
        assert r.headers["access-control-allow-origin"] == "*"
    found = cards[0].json()
    assert cards[1].json() == found
    _valid(found, CARD)
    (remote,) = found["remotes"]
    assert remote["type"] == "streamable-http" and remote["url"] == f"{server.url}/api/mcp"
    assert found["name"] == "127.0.0.1/lev" and found["websiteUrl"] == f"{server.url}/"

    token = user.token()
    init = rpc(server, token, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                             "clientInfo": {"name": "card", "version": "1"}}).json()["result"]
    assert (found["version"], found["title"]) == (init["serverInfo"]["version"], init["serverInfo"]["title"]) == \
        (VERSION, "Lev knowledge base")
    discovered = modern(server, token, "server/discover").json()["result"]
    assert remote["supportedProtocolVersions"] == discovered["supportedVersions"]
    # the endpoint the card names answers; without the token it asks for one, so the header is described
    assert httpx.post(remote["url"], json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                      headers={"Accept": "application/json, text/event-stream"}).status_code == 401
    (auth,) = remote["headers"]
    assert auth["name"] == "Authorization" and auth["isSecret"] and auth["value"] == "Bearer {token}"
    assert auth["variables"]["token"]["isSecret"]


def test_server_json_is_the_registry_entry_and_agrees_with_the_card(server) -> None:  # type: ignore[no-untyped-def]
    written = json.loads((ROOT / "server.json").read_text())
    assert written == card.registry_entry()  # regenerate: python -c 'from lev.mcp.card import registry_entry ...'
    _valid(written, REGISTRY)
    served = httpx.get(f"{server.url}/.well-known/mcp/server-card.json").json()
    for key in ("version", "title", "description"):
        assert written[key] == served[key], key
    (remote,), (live,) = written["remotes"], served["remotes"]
    assert remote["url"].replace("https://{host}", server.url) == live["url"]
    assert remote["variables"]["host"]["isRequired"] and remote["headers"] == live["headers"]
    assert written["name"].endswith("/lev")
