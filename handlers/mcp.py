"""POST /api/mcp: the MCP surface (JSON-RPC 2.0 over streamable HTTP, stateless) and its four tools.

Tools, their schemas and capabilities come from `mcp_tools.json`; errors are shaped by `lev.errors`.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlsplit

from jsonrpcserver import Success, async_dispatch
from jsonrpcserver.exceptions import JsonRpcError
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from lev import __version__, context, jsonguard, library, logs, principals, runtime
from lev.errors import (
    JSONRPC_INVALID_PARAMS,
    JSONRPC_METHOD_NOT_FOUND,
    JSONRPC_PARSE_ERROR,
    ApiError,
    forbidden_origin,
    internal_error,
    invalid_body,
    jsonrpc_error,
    jsonrpc_response,
    rest_headers,
    to_api_error,
    tool_error,
    transport_error,
)
from lev.openapi import mcp_tools
from lev.pipeline.ingest import ingest
from lev.policy import Principal, parse_bearer, parse_uuid_field, require
from lev.settings import get_settings

log = logging.getLogger("lev.mcp")

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
# The stateless revision a 2.x SDK client probes with `server/discover` before falling back to initialize.
PROBE_VERSIONS = ("2026-07-28",)
INSTRUCTIONS = (
    "Lev is the user's personal knowledge base. Search it with search_knowledge_base before answering "
    "from memory, read a whole source with get_item, see what was saved lately with list_recent, and save "
    "pages or notes the user wants to keep with add_to_knowledge."
)


def _tool_index() -> dict[str, dict[str, Any]]:
    tools = {t["name"]: t for t in mcp_tools()["tools"]}
    for t in tools.values():
        t.setdefault("_validator", Draft202012Validator(t["inputSchema"], format_checker=FormatChecker()))
    return tools


def _listed(tool: dict[str, Any]) -> dict[str, Any]:
    keys = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
    return {k: tool[k] for k in keys if k in tool}


def _tool_result(obj: dict[str, Any]) -> Any:
    return Success({"content": [{"type": "text", "text": json.dumps(obj)}], "structuredContent": obj,
                    "isError": False})


async def initialize(_ctx: dict[str, Any], **params: Any) -> Any:
    asked = params.get("protocolVersion")
    version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
    return Success({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "lev", "title": "Lev knowledge base", "version": __version__},
        "instructions": INSTRUCTIONS,
    })


async def ping(_ctx: dict[str, Any], **_params: Any) -> Any:
    return Success({})


async def tools_list(_ctx: dict[str, Any], **_params: Any) -> Any:
    return Success({"tools": [_listed(t) for t in _tool_index().values()]})


async def server_discover(_ctx: dict[str, Any], **_params: Any) -> Any:
    raise JsonRpcError(code=JSONRPC_METHOD_NOT_FOUND, message="Method not found: use initialize (protocol 2025-11-25)")


def _validate_arguments(tool: dict[str, Any], arguments: Any) -> dict[str, Any]:
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise jsonrpc_error(invalid_body("arguments must be an object"))
    errors = sorted(tool["_validator"].iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        first: ValidationError = errors[0]
        where = ".".join(str(p) for p in first.path) or (
            first.validator_value[0] if first.validator == "required" and isinstance(first.validator_value, list)
            else "arguments")
        if first.validator == "additionalProperties":
            where = "arguments"
        message = f"Invalid argument {where}: {first.message}"
        raise jsonrpc_error(invalid_body(message))
    return arguments


async def tools_call(ctx: dict[str, Any], name: Any = None, arguments: Any = None, **_extra: Any) -> Any:
    tools = _tool_index()
    if not isinstance(name, str) or name not in tools:
        raise jsonrpc_error(invalid_body(f"Unknown tool: {name!r}", tools=sorted(tools)))
    tool = tools[name]
    info = context.current()
    if info is not None:
        info.method = f"tools/call {name}"
    args = _validate_arguments(tool, arguments)
    principal: Principal = ctx["principal"]
    try:
        require(principal, tool["capability"])
        await runtime.get_runtime().limiter.apply(principal, tool.get("limit_class"))
        result = await TOOLS[name](principal, args)
    except ApiError as err:
        if err.entry.tool_result:
            return Success(tool_error(err))
        if err.status >= 500:
            log.error("tool %s failed: %s", name, err)
        raise jsonrpc_error(err) from None
    except JsonRpcError:
        raise
    except Exception as exc:  # a bug (500) or an unreachable database or Redis (503)
        raise jsonrpc_error(to_api_error(exc), info.request_id if info else None) from None
    return _tool_result(result)


async def _search(p: Principal, args: dict[str, Any]) -> dict[str, Any]:
    return await library.search(p, query=args["query"], mode=args.get("mode", "hybrid"),
                                limit=args.get("limit", 10))


async def _get_item(p: Principal, args: dict[str, Any]) -> dict[str, Any]:
    item_id = parse_uuid_field(args["item_id"], "item_id")
    assert item_id is not None
    return await library.get_item(p, item_id)


async def _list_recent(p: Principal, args: dict[str, Any]) -> dict[str, Any]:
    return {"items": await library.list_recent(p, args.get("limit", 20))}


async def _add(p: Principal, args: dict[str, Any]) -> dict[str, Any]:
    has_url, has_text = "url" in args, "text" in args
    if has_url == has_text:
        raise invalid_body("Give exactly one of url or text.")
    result = await ingest(
        p, kind="url" if has_url else "text", url=args.get("url"), text=args.get("text"), title=args.get("title"),
        in_kb=args.get("in_kb", True), auto_transform=args.get("auto_transform", False),
        folder_id=parse_uuid_field(args.get("folder_id"), "folder_id"),
    )
    return {"status": result["status"], "item_id": result["user_item_id"], **result}


TOOLS = {"search_knowledge_base": _search, "get_item": _get_item, "list_recent": _list_recent,
         "add_to_knowledge": _add}

METHODS = {"initialize": initialize, "ping": ping, "tools/list": tools_list, "tools/call": tools_call,
           "server/discover": server_discover}


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _transport_error(err: ApiError) -> Response:
    return _json(transport_error(err), err.status, rest_headers(err))


def _origin_allowed(origin: str) -> bool:
    """LEV_ALLOWED_ORIGINS plus the service's own origin (LEV_BASE_URL, else the address served, where a
    loopback address also stands for `localhost`)."""
    settings = get_settings()
    allowed = {o.rstrip("/").lower() for o in settings.allowed_origins}
    base = urlsplit(context.base_url())
    allowed.add(f"{base.scheme}://{base.netloc}".lower())
    if not settings.base_url and base.hostname in {"127.0.0.1", "::1"}:
        allowed.add(f"{base.scheme}://localhost{f':{base.port}' if base.port else ''}")
    return origin.rstrip("/").lower() in allowed


async def endpoint(request: Request) -> Response:
    """The MCP streamable-HTTP endpoint (stateless: no sessions, no GET stream)."""
    if request.method != "POST":
        return Response(status_code=405, headers={"Allow": "POST"})
    info = context.current()
    origin = request.headers.get("origin")
    if origin and not _origin_allowed(origin):
        return _transport_error(forbidden_origin(origin))
    version = request.headers.get("mcp-protocol-version")
    if version and version not in PROTOCOL_VERSIONS + PROBE_VERSIONS:
        return _transport_error(invalid_body(
            f"Unsupported MCP-Protocol-Version {version}; supported: {', '.join(PROTOCOL_VERSIONS)}."))
    try:
        token = parse_bearer(request.headers.get("authorization"))
        principal = await principals.authenticate_bearer(token)
    except ApiError as err:
        return _transport_error(err)
    if info is not None:
        info.principal = principal
    logs.bind(user_id=principal.user_id, token_id=principal.token_id)
    body = await request.body()
    try:
        document = jsonguard.loads(body)
    except jsonguard.BadJson as exc:
        if info is not None and not info.method:
            info.method = _method_name(exc.document) if exc.parsed else "invalid-json"
        out = _refusal(exc)
    else:
        if info is not None and not info.method:
            info.method = _method_name(document)
        try:
            out = await async_dispatch(body.decode("utf-8"), methods=METHODS, context={"principal": principal})
        except Exception:  # a bug: still a JSON-RPC answer, never a REST body
            log.exception("MCP dispatch failed")
            out = json.dumps(jsonrpc_response(internal_error(), _request_id(document),
                                              request_id=info.request_id if info else None))
    if not out:
        return Response(status_code=202)
    accept = request.headers.get("accept", "")
    if "text/event-stream" in accept and "application/json" not in accept and "*/*" not in accept:
        return Response(f"event: message\ndata: {out}\n\n", media_type="text/event-stream",
                        headers={"Cache-Control": "no-cache"})
    return Response(out, media_type="application/json")


def _request_id(document: Any) -> Any:
    """The id of a single JSON-RPC request (for answering one we refuse), else null."""
    if isinstance(document, dict):
        req_id = document.get("id")
        if isinstance(req_id, (str, int)) and not isinstance(req_id, bool):
            return req_id
    return None


def _refusal(exc: jsonguard.BadJson) -> str:
    """The JSON-RPC error for a body lev.jsonguard refused: -32700 if it is not JSON at all, else -32602."""
    code, prefix = (JSONRPC_INVALID_PARAMS, "Invalid params") if exc.parsed else (JSONRPC_PARSE_ERROR, "Parse error")
    req_id = _request_id(exc.document) if exc.parsed else None
    return json.dumps(jsonrpc_response(invalid_body(f"{prefix}: {exc}"), req_id, code=code))


def _method_name(msg: Any) -> str:
    if isinstance(msg, dict) and isinstance(msg.get("method"), str):
        return msg["method"][:100]
    return "batch" if isinstance(msg, list) else "invalid"
