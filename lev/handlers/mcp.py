"""POST /api/mcp: the MCP surface (JSON-RPC 2.0 over streamable HTTP, stateless), its four tools, its resources
(the view, and every item as `lev://items/{item_id}`) and the Server Card.

One dispatch serves every protocol revision: 2025-03-26, 2025-06-18 and 2025-11-25 (opened by `initialize`) and
2026-07-28 (per-request `_meta`, `server/discover`), chosen per request by `lev.mcp.revision`. Tools, their
schemas and capabilities come from `mcp_tools.json`; errors are shaped by `lev.core.errors`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from jsonrpcserver import Success
from jsonrpcserver.async_main import dispatch_to_serializable
from jsonrpcserver.exceptions import JsonRpcError
from jsonschema import FormatChecker
from jsonschema.exceptions import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from lev import runtime
from lev.auth.policy import Principal, parse_uuid_field, require
from lev.core import context, jsonguard
from lev.core.contract import ContractValidator, first_errors, mcp_tools, said
from lev.core.errors import (
    JSONRPC_INVALID_PARAMS,
    JSONRPC_INVALID_REQUEST,
    JSONRPC_PARSE_ERROR,
    JSONRPC_RESOURCE_NOT_FOUND,
    ApiError,
    forbidden_origin,
    internal_error,
    invalid_body,
    jsonrpc_error,
    jsonrpc_response,
    not_found,
    rest_headers,
    to_api_error,
    tool_error,
    transport_error,
)
from lev.handlers import deps
from lev.ingest.request import IngestRequest
from lev.ingest.service import ingest
from lev.library import reads as library
from lev.library.filters import parse_filters
from lev.mcp import app, budget, card, resources, revision
from lev.oauth import server as oauth
from lev.ops import logs

log = logs.get_logger("lev.mcp")

CAPABILITIES = {"tools": {"listChanged": False}}
INSTRUCTIONS = (
    "Lev is the user's personal knowledge base. Search it with search_knowledge_base before answering "
    "from memory, read a whole source with get_item, see what was saved lately with list_recent, and save "
    "pages or notes the user wants to keep with add_to_knowledge."
)


def _tool_index() -> dict[str, dict[str, Any]]:
    tools = {t["name"]: t for t in mcp_tools()["tools"]}
    for t in tools.values():
        t.setdefault("_validator", ContractValidator(t["inputSchema"], format_checker=FormatChecker()))
    return tools


def _listed(tool: dict[str, Any]) -> dict[str, Any]:
    keys = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta")
    return {k: tool[k] for k in keys if k in tool}


def _tool_result(obj: dict[str, Any]) -> Any:
    return Success(budget.tool_result(obj))


async def initialize(_ctx: dict[str, Any], **params: Any) -> Any:
    """The legacy handshake (2025-03-26 to 2025-11-25): an unknown version is answered with the newest of them."""
    asked = params.get("protocolVersion")
    version = asked if asked in revision.LEGACY else revision.LEGACY[0]
    capabilities = app.server_capabilities(CAPABILITIES, params.get("capabilities"))
    return Success({"protocolVersion": version, "capabilities": capabilities, "serverInfo": revision.SERVER_INFO,
                    "instructions": INSTRUCTIONS})


async def server_discover(_ctx: dict[str, Any], **params: Any) -> Any:
    """2026-07-28's discovery (no handshake): every revision Lev speaks, newest first, and what it serves."""
    meta = params.get("_meta")
    client = meta.get(revision.CLIENT_CAPABILITIES_KEY) if isinstance(meta, dict) else None
    return Success({"supportedVersions": list(revision.SUPPORTED),
                    "capabilities": app.server_capabilities(CAPABILITIES, client), "instructions": INSTRUCTIONS})


async def resources_list(_ctx: dict[str, Any], **_params: Any) -> Any:
    """The one listed resource: Lev's MCP App view (items are reached through the template, never listed)."""
    return Success({"resources": app.resources()})


async def resources_templates_list(_ctx: dict[str, Any], **_params: Any) -> Any:
    return Success({"resourceTemplates": resources.TEMPLATES})


async def resources_read(ctx: dict[str, Any], uri: Any = None, **_params: Any) -> Any:
    """The view's HTML, or a page of an item's text under the token's scope; an unknown URI, or an item the token
    cannot see, is MCP's -32002."""
    if not isinstance(uri, str):
        raise jsonrpc_error(invalid_body("resources/read takes a string uri."))
    try:
        ref = resources.parse_item_uri(uri)
    except ApiError as err:
        raise jsonrpc_error(err) from None
    if ref is not None:
        return Success(await _read_item(ctx["principal"], uri, ref))
    found = app.read(uri, context.base_url())
    if found is None:
        raise jsonrpc_error(not_found(f"No resource {uri[:200]!r}; Lev serves {app.RESOURCE_URI} and "
                                      f"{resources.ITEM_TEMPLATE}."), code=JSONRPC_RESOURCE_NOT_FOUND)
    return Success(found)


async def _read_item(principal: Principal, uri: str, ref: resources.ItemRef) -> dict[str, Any]:
    """A page of the item's text within get_item's 64 KB budget, as get_item reads it (scope and kb_only)."""
    try:
        require(principal, "read")
        await runtime.get_runtime().limiter.apply(principal, _tool_index()["get_item"].get("limit_class"))
        item = await library.get_item(deps(), principal, ref.item_id)
    except ApiError as err:
        code = JSONRPC_RESOURCE_NOT_FOUND if err.code == "not_found" else None
        raise jsonrpc_error(err, code=code) from None
    except Exception as exc:  # a bug (500) or an unreachable database or Redis (503)
        info = context.current()
        raise jsonrpc_error(to_api_error(exc), info.request_id if info else None) from None
    return budget.fit_page(lambda chars: resources.contents(uri, library.page(item, ref.offset, chars)),
                           weigh=resources.wire_bytes)


async def ping(_ctx: dict[str, Any], **_params: Any) -> Any:
    return Success({})


async def tools_list(_ctx: dict[str, Any], **_params: Any) -> Any:
    return Success({"tools": [_listed(t) for t in _tool_index().values()]})


def _validate_arguments(tool: dict[str, Any], arguments: Any) -> dict[str, Any]:
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise jsonrpc_error(invalid_body("arguments must be an object"))
    errors = sorted(first_errors(tool["_validator"], arguments), key=lambda e: [str(p) for p in e.path])
    if errors:
        first: ValidationError = errors[0]
        where = ".".join(str(p) for p in first.path) or (
            first.validator_value[0] if first.validator == "required" and isinstance(first.validator_value, list)
            else "arguments")
        if first.validator == "additionalProperties":
            where = "arguments"
        message = f"Invalid argument {where}: {said(first)}"
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
            log.error("tool failed", tool=name, error=str(err))
        raise jsonrpc_error(err) from None
    except JsonRpcError:
        raise
    except Exception as exc:  # a bug (500) or an unreachable database or Redis (503)
        raise jsonrpc_error(to_api_error(exc), info.request_id if info else None) from None
    return _tool_result(result)


async def _search(p: Principal, args: dict[str, Any]) -> dict[str, Any]:
    filters = parse_filters(folder_id=args.get("folder_id"), item_id=args.get("item_id"), kind=args.get("kind"),
                            site=args.get("site"), after=args.get("after"), before=args.get("before"),
                            tag=args.get("tags"), tag_name="tags")
    limit = args.get("limit", 10)
    answer = await library.search(deps(), p, query=args["query"], mode=args.get("mode", "hybrid"), limit=limit,
                                  filters=filters)
    return budget.fit_search(answer, limit)


async def _get_item(p: Principal, args: dict[str, Any]) -> dict[str, Any]:
    item_id = parse_uuid_field(args["item_id"], "item_id")
    assert item_id is not None
    offset, max_chars = args.get("offset", 0), args.get("max_chars")
    library.check_page(offset, max_chars)
    item = await library.get_item(deps(), p, item_id)
    if max_chars is not None:
        return library.page(item, offset, max_chars)
    return budget.fit_page(lambda chars: library.page(item, offset, chars))


async def _list_recent(p: Principal, args: dict[str, Any]) -> dict[str, Any]:
    return {"items": await library.list_recent(deps(), p, args.get("limit", 20))}


async def _add(p: Principal, args: dict[str, Any]) -> dict[str, Any]:
    has_url, has_text = "url" in args, "text" in args
    if has_url == has_text:
        raise invalid_body("Give exactly one of url or text.")
    if has_url and "kind" in args:
        raise invalid_body("kind goes with text (what the text is), not with url.")
    req = IngestRequest(
        "url" if has_url else args.get("kind", "text"), url=args.get("url"), text=args.get("text"),
        title=args.get("title"),
        in_kb=args.get("in_kb", True), auto_transform=args.get("auto_transform", False),
        folder_id=parse_uuid_field(args.get("folder_id"), "folder_id"), tags=tuple(args.get("tags") or ()),
    )
    result = (await ingest(deps(), p, req)).answer()
    return {"status": result["status"], "item_id": result["user_item_id"], **result}


TOOLS = {"search_knowledge_base": _search, "get_item": _get_item, "list_recent": _list_recent,
         "add_to_knowledge": _add}

# The methods each era serves: the tools are the same functions under every revision.
_HANDLERS = {"initialize": initialize, "ping": ping, "server/discover": server_discover, "tools/list": tools_list,
             "resources/list": resources_list, "resources/templates/list": resources_templates_list,
             "resources/read": resources_read, "tools/call": tools_call}
LEGACY_METHODS = {m: _HANDLERS[m] for m in ("initialize", "ping", "tools/list", "tools/call", "resources/list",
                                             "resources/templates/list", "resources/read")}
MODERN_METHODS = {m: _HANDLERS[m] for m in revision.MODERN_METHODS}


async def server_card(request: Request) -> Response:
    """GET /.well-known/mcp/server-card.json (and /api/mcp/server-card): public, as discovery needs it."""
    base = oauth.public_base(deps().settings, request.headers.get("host"))
    return _json(card.server_card(base), headers={"Access-Control-Allow-Origin": "*", "Cache-Control": "max-age=300"})


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _transport_error(err: ApiError, base: str | None = None) -> Response:
    headers = rest_headers(err)
    if err.status == 401 and base is not None:  # the OAuth challenge: where to get a token, with which scopes
        headers["WWW-Authenticate"] = oauth.challenge(base, err)
    return _json(transport_error(err), err.status, headers)


def _origin_allowed(origin: str) -> bool:
    """LEV_ALLOWED_ORIGINS plus the service's own origin (LEV_BASE_URL, else the address served, where a
    loopback address also stands for `localhost`)."""
    settings = deps().settings
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
    try:
        version = revision.requested_version(request.headers)
    except ApiError as err:
        return _json(jsonrpc_response(err), err.status)
    base = oauth.public_base(deps().settings, request.headers.get("host"))
    try:  # a pasted lev_ token, or an OAuth access token issued for this resource
        principal = await oauth.authenticate_mcp(deps().db, request.headers.get("authorization"), base)
    except ApiError as err:
        return _transport_error(err, base)
    if info is not None:
        info.principal = principal
    logs.bind(user_id=principal.user_id, token_id=principal.token_id)
    body = await request.body()
    bad: jsonguard.BadJson | None = None
    try:
        document = await jsonguard.loads_off_loop(body)
    except jsonguard.BadJson as refused_json:
        document, bad = None, refused_json
    refused = oauth.transport_scope_refusal(principal, request.headers, document, base)
    if refused is not None:  # 403 insufficient_scope for an OAuth grant naming a tool it may not call
        return _json(refused[0], 403, refused[1])
    if bad is not None:
        if info is not None and not info.method:
            info.method = _method_name(bad.document) if bad.parsed else "invalid-json"
        return _answer(request, _refusal(bad), 400 if version == revision.MODERN else 200)
    if info is not None and not info.method:
        info.method = _method_name(document)
    text = body.decode("utf-8")
    try:
        modern = revision.is_modern(version, document)
    except ApiError as err:
        return _answer(request, jsonrpc_response(err, _request_id(document)), err.status)
    if modern:
        answer, status = await _serve_modern(document, text, request, principal)
        return _answer(request, answer, status)
    return _answer(request, await _dispatch(text, LEGACY_METHODS, principal, document), 200)


async def _serve_modern(document: Any, text: str, request: Request, principal: Principal) -> tuple[Any, int]:
    """One 2026-07-28 request: its envelope, `_meta` and routing headers checked, then the one dispatch, its
    answer shaped for the revision. A notification is acknowledged (202) and dropped."""
    problem = revision.envelope_problem(document)
    if problem is not None:
        return jsonrpc_response(invalid_body(problem), _request_id(document), code=JSONRPC_INVALID_REQUEST), 400
    if "id" not in document:
        return None, 202
    try:
        revision.check_request(document, request.headers)
    except ApiError as err:
        return jsonrpc_response(err, document["id"]), err.status
    params = document.get("params")
    target = params.get("uri") if isinstance(params, dict) else None
    return revision.shape(document["method"], await _dispatch(text, MODERN_METHODS, principal, document), target)


async def _dispatch(text: str, methods: dict[str, Any], principal: Principal, document: Any) -> Any:
    """The JSON-RPC answer (an object, a list for a batch, None for notifications only) from the one dispatch."""
    try:
        return await dispatch_to_serializable(text, methods=methods, context={"principal": principal})
    except Exception:  # a bug: still a JSON-RPC answer, never a REST body
        log.exception("MCP dispatch failed")
        info = context.current()
        return jsonrpc_response(internal_error(), _request_id(document), request_id=info.request_id if info else None)


def _answer(request: Request, answer: Any, status: int) -> Response:
    """The HTTP response for a JSON-RPC answer: 202 when there is none; server-sent events when the client
    accepts only those (a 200 answer); else JSON."""
    if answer is None:
        return Response(status_code=202)
    out = budget.wire(answer)
    accept = request.headers.get("accept", "")
    if status == 200 and "text/event-stream" in accept and "application/json" not in accept and "*/*" not in accept:
        return Response(b"event: message\ndata: " + out + b"\n\n", media_type="text/event-stream",
                        headers={"Cache-Control": "no-cache"})
    return Response(out, status_code=status, media_type="application/json")


def _request_id(document: Any) -> Any:
    """The id of a single JSON-RPC request (for answering one we refuse), else null."""
    if isinstance(document, dict):
        req_id = document.get("id")
        if isinstance(req_id, (str, int)) and not isinstance(req_id, bool):
            return req_id
    return None


def _refusal(exc: jsonguard.BadJson) -> dict[str, Any]:
    """The JSON-RPC error for a body lev.core.jsonguard refused: -32700 if it is not JSON at all, else -32602."""
    code, prefix = (JSONRPC_INVALID_PARAMS, "Invalid params") if exc.parsed else (JSONRPC_PARSE_ERROR, "Parse error")
    req_id = _request_id(exc.document) if exc.parsed else None
    return jsonrpc_response(invalid_body(f"{prefix}: {exc}"), req_id, code=code)


def _method_name(msg: Any) -> str:
    if isinstance(msg, dict) and isinstance(msg.get("method"), str):
        return msg["method"][:100]
    return "batch" if isinstance(msg, list) else "invalid"
