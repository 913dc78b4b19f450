"""Which MCP protocol revision a request speaks, and the rules of revision 2026-07-28 around the one dispatch.

Revisions 2025-03-26, 2025-06-18 and 2025-11-25 open with `initialize` (the legacy era). 2026-07-28 is stateless:
every request carries its version and the client's capabilities in `params._meta`, mirrored into the
`MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers, and results carry `resultType` (plus `ttlMs` and
`cacheScope` where the revision allows caching). The revision is chosen per request from the version header.
This module checks a 2026-07-28 request (raising the error table's errors), maps its answers to HTTP statuses and
shapes its results; the methods themselves are the same for every revision. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from starlette.datastructures import Headers

from lev.core.errors import (
    JSONRPC_HEADER_MISMATCH,
    JSONRPC_INVALID_PARAMS,
    JSONRPC_INVALID_REQUEST,
    JSONRPC_METHOD_NOT_FOUND,
    JSONRPC_PARSE_ERROR,
    JSONRPC_UNSUPPORTED_PROTOCOL_VERSION,
    header_mismatch,
    invalid_body,
    method_not_found,
    unsupported_protocol_version,
)
from lev.core.packagedata import VERSION

MODERN = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26")
SUPPORTED = (MODERN, *LEGACY)
# The methods 2026-07-28 serves (`initialize` and `ping` are gone from it; `server/discover` is new).
MODERN_METHODS = ("server/discover", "tools/list", "tools/call", "resources/list", "resources/templates/list",
                  "resources/read")

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SERVER_INFO = {"name": "lev", "title": "Lev knowledge base", "version": VERSION}

VERSION_HEADER, METHOD_HEADER, NAME_HEADER = "mcp-protocol-version", "mcp-method", "mcp-name"
ROUTING_HEADERS = (VERSION_HEADER, METHOD_HEADER, NAME_HEADER)
# Methods whose target is mirrored into Mcp-Name, and the param it mirrors.
NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

# Cache hints on the results the revision marks cacheable. The tool list and the discovery answer change only
# when Lev is upgraded, so clients may reuse them for five minutes; "private" because every Lev request is
# authenticated and a shared cache must not answer a caller Lev never saw.
CACHEABLE = ("server/discover", "tools/list", "resources/list", "resources/templates/list", "resources/read")
CACHE_TTL_MS = 300_000
CACHE_SCOPE = "private"

# The revision's HTTP status for a JSON-RPC error code; every other code (-32605, -32603) travels with 200.
STATUS_BY_CODE = {
    JSONRPC_PARSE_ERROR: 400, JSONRPC_INVALID_REQUEST: 400, JSONRPC_INVALID_PARAMS: 400,
    JSONRPC_HEADER_MISMATCH: 400, JSONRPC_UNSUPPORTED_PROTOCOL_VERSION: 400, JSONRPC_METHOD_NOT_FOUND: 404,
}

_SENTINEL = re.compile(r"=\?base64\?(.*)\?=")


def requested_version(headers: Headers) -> str | None:
    """The `MCP-Protocol-Version` header (None when absent), checked before anything else is read:
    a repeated header is a `header_mismatch`, a revision Lev does not speak `unsupported_protocol_version`."""
    values = headers.getlist(VERSION_HEADER)
    if len(values) > 1:
        raise header_mismatch("The MCP-Protocol-Version header appears more than once.")
    if not values:
        return None
    if values[0] not in SUPPORTED:
        raise unsupported_protocol_version(values[0], list(SUPPORTED))
    return str(values[0])


def is_modern(version: str | None, document: Any) -> bool:
    """Whether a parsed body is served as 2026-07-28. The header decides; a request whose `_meta` names a
    protocol version must also send it in the header, and the two must agree."""
    if version == MODERN:
        return True
    if not isinstance(document, dict) or "id" not in document:
        return False  # batches and notifications are legacy-era or acknowledged as they are
    params = document.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta:
        if version is None:
            raise header_mismatch("The MCP-Protocol-Version header is missing; it must repeat the version in "
                                  "params._meta.")
        if meta[PROTOCOL_VERSION_KEY] != version:
            raise header_mismatch("The MCP-Protocol-Version header does not match the version in params._meta.")
    return False


def envelope_problem(document: Any) -> str | None:
    """Why a 2026-07-28 body is not one JSON-RPC 2.0 request or notification (answered with -32600), or None."""
    if not isinstance(document, dict) or document.get("jsonrpc") != "2.0" or not isinstance(
            document.get("method"), str) or not isinstance(document.get("params", {}), dict) or (
            "id" in document and not _is_id(document["id"])):
        return (f"Protocol {MODERN} takes one JSON-RPC 2.0 request or notification per POST: jsonrpc \"2.0\", "
                "a string method, object params and, on a request, a string or integer id.")
    return None


def check_request(document: dict[str, Any], headers: Headers) -> None:
    """The 2026-07-28 checks on one well-formed request, in the specification's order: the `_meta` envelope
    (-32602), the routing headers against the body (-32020), a method this revision serves (-32601)."""
    method: str = document["method"]
    params: dict[str, Any] = document.get("params", {})
    meta = params.get("_meta")
    if not isinstance(meta, dict) or PROTOCOL_VERSION_KEY not in meta or CLIENT_CAPABILITIES_KEY not in meta:
        raise invalid_body(f"params._meta must be an object carrying {PROTOCOL_VERSION_KEY} and "
                           f"{CLIENT_CAPABILITIES_KEY} (protocol {MODERN}).")
    for name in ROUTING_HEADERS:
        if len(headers.getlist(name)) > 1:
            raise header_mismatch(f"The {_title(name)} header appears more than once.")
    if headers.get(VERSION_HEADER) != meta[PROTOCOL_VERSION_KEY]:
        raise header_mismatch("The MCP-Protocol-Version header does not match the version in params._meta.")
    if headers.get(METHOD_HEADER) is None:
        raise header_mismatch("The Mcp-Method header is missing; it must repeat the request's method.")
    if headers.get(METHOD_HEADER) != method:
        raise header_mismatch("The Mcp-Method header does not match the request's method.")
    name_key = NAME_PARAMS.get(method)
    target = params.get(name_key) if name_key else None
    if isinstance(target, str) and decode_header_value(headers.get(NAME_HEADER)) != target:
        what = "is missing" if headers.get(NAME_HEADER) is None else "does not match"
        raise header_mismatch(f"The Mcp-Name header {what}; it must repeat params.{name_key}.")
    if not isinstance(meta[CLIENT_CAPABILITIES_KEY], dict) or not isinstance(meta.get(CLIENT_INFO_KEY, {}), dict):
        raise invalid_body(f"params._meta: {CLIENT_CAPABILITIES_KEY} and {CLIENT_INFO_KEY} must be objects.")
    if method not in MODERN_METHODS:
        raise method_not_found(method, list(MODERN_METHODS))


def shape(method: str, answer: dict[str, Any], target: Any = None) -> tuple[dict[str, Any], int]:
    """A 2026-07-28 answer and its HTTP status: results gain `resultType`, the cache hints where the method is
    cacheable (a read only of the view: an item's text changes when it is captured again), and the server's
    identity in `_meta`; errors keep their body and take the revision's status."""
    if "error" in answer:
        return answer, STATUS_BY_CODE.get(answer["error"].get("code"), 200)
    result = dict(answer["result"])
    result["resultType"] = "complete"
    if method in CACHEABLE and (method != "resources/read" or str(target).startswith("ui://")):
        result.update(ttlMs=CACHE_TTL_MS, cacheScope=CACHE_SCOPE)
    meta = result.get("_meta")
    result["_meta"] = {**(meta if isinstance(meta, dict) else {}), SERVER_INFO_KEY: SERVER_INFO}
    return {**answer, "result": result}, 200


def decode_header_value(value: str | None) -> str | None:
    """A header value as sent, or the UTF-8 text inside the revision's `=?base64?…?=` sentinel; None for a
    malformed sentinel (which then matches nothing)."""
    if value is None:
        return None
    found = _SENTINEL.fullmatch(value)
    if found is None:
        return value
    try:
        raw = base64.b64decode(found.group(1), validate=True)
        if base64.b64encode(raw).decode("ascii") != found.group(1):
            return None
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _is_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _title(header: str) -> str:
    return "MCP-Protocol-Version" if header == VERSION_HEADER else "-".join(p.title() for p in header.split("-"))
