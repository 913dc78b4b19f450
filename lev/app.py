"""The composition root: the Connexion app, the outer middleware, the auth hook and error mapping."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from ipaddress import ip_address, ip_network
from typing import Any

from connexion import AsyncApp
from connexion.exceptions import ProblemException
from connexion.lifecycle import ConnexionRequest, ConnexionResponse
from connexion.options import SwaggerUIOptions
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from handlers import mcp as mcp_handler
from handlers import oauth as oauth_handler
from handlers import ops, pages
from handlers import spec as spec_handler
from lev import runtime
from lev.auth import accounts
from lev.auth import principal_cache as principals
from lev.core import clock, context
from lev.core.contract import OperationResolver, connexion_spec, operations, security_map, validator_map
from lev.core.errors import ApiError, file_too_large, not_signed_in, rest_body, rest_headers, to_api_error
from lev.core.settings import Settings, get_settings
from lev.oauth import server as oauth
from lev.ops import logs, metrics
from store.db import read_session
from tasks.worker import make_worker, stop_gracefully

log = logging.getLogger("lev")
request_log = logs.get_logger("lev.request")

UPLOAD_PUT_PREFIX = "/api/v1/uploads/put/"
IMPORTS_PATH = "/api/v1/imports"
MULTIPART_SLACK = 64 * 1024  # an import's form around its file: boundaries and part headers
OPS_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
OAUTH_PATHS = frozenset({oauth.PRM_PATH + oauth.MCP_PATH, oauth.PRM_PATH, oauth.AS_PATH, oauth.AUTHORIZE_PATH,
                         oauth.TOKEN_PATH, oauth.REGISTER_PATH, oauth.REVOKE_PATH})


def error_response(err: ApiError) -> ConnexionResponse:
    """An error as Connexion's response: the body and headers shaped by lev.core.errors."""
    info = context.current()
    body = rest_body(err, info.request_id if info is not None else None)
    return ConnexionResponse(status_code=err.status, body=json.dumps(body), headers=rest_headers(err),
                             content_type="application/json")


async def handle_error(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    err = to_api_error(exc)
    info = context.current()
    if err.code == "missing_bearer_token" and info is not None and info.surface == "web":
        err = not_signed_in()
    if err.status == 405:  # RFC 9110: a 405 names the methods the route has
        err.headers["Allow"] = ", ".join(allowed_methods(request.url.path))
    return error_response(err)


_LIMIT_CLASS: dict[str, str | None] = {}
_ROUTES: list[tuple[re.Pattern[str], str]] = []
_TEMPLATES: set[str] = set()


def route_template(path: str) -> str:
    """The documented route a path matches (`/api/v1/items/{id}`), for the activity log; else the raw path."""
    if not _ROUTES:
        for op in operations().values():
            template = op["path"]
            regex = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
            _ROUTES.append((re.compile(f"^{regex}$"), template))
        _TEMPLATES.update(t for _, t in _ROUTES)
    for compiled, template in _ROUTES:
        if compiled.match(path):
            return template
    return path[:200]


def allowed_methods(path: str) -> list[str]:
    """The documented methods of the route `path` matches (the MCP route answers its own 405s)."""
    template = route_template(path)
    return sorted({op["method"] for op in operations().values() if op["path"] == template})


def metric_route(method: str, path: str) -> str:
    """A bounded route label for metrics: the documented template, the MCP or ops path, else `other`."""
    if path in OPS_PATHS or path in OAUTH_PATHS or path == "/api/mcp":
        return f"{method} {path}"
    if path.startswith(UPLOAD_PUT_PREFIX):
        return f"{method} {UPLOAD_PUT_PREFIX}{{path}}"
    template = route_template(path)
    return f"{method} {template}" if template != path[:200] or path in _TEMPLATES else "other"


def limit_class(operation_id: str | None) -> str | None:
    if not _LIMIT_CLASS:
        for op_id, op in operations().items():
            _LIMIT_CLASS[op_id] = op["operation"].get("x-lev-limit")
    return _LIMIT_CLASS.get(operation_id or "")


async def bearer_info(token: str, request: Any = None) -> dict[str, Any]:
    """Connexion's bearer hook: authenticate, then apply the operation's rate-limit class."""
    principal = await principals.authenticate_bearer(token)
    info = context.current()
    if info is not None:
        info.principal = principal
    logs.bind(user_id=principal.user_id, token_id=principal.token_id)
    op_id = None
    if request is not None:
        op_id = request.scope.get("extensions", {}).get("connexion_routing", {}).get("operation_id")
    await runtime.get_runtime().limiter.apply(principal, limit_class(op_id))
    return {"sub": str(principal.user_id), "principal": principal}


async def session_info(cookie_value: str, request: Any = None) -> dict[str, Any]:
    """Connexion's cookie hook: a signed-in browser session acts as its user (surface `web`); unsafe methods
    need the session's X-CSRF-Token (403 csrf_failed)."""
    async with read_session() as s:
        principal = await accounts.authenticate_session(s, cookie_value)
    if request is not None:
        accounts.check_csrf(principal, request.method, request.headers.get(accounts.CSRF_HEADER))
    info = context.current()
    if info is not None:
        info.principal = principal
        info.surface = "web"
    return {"sub": str(principal.user_id), "principal": principal}


def _client_ip(scope: Scope, headers: dict[str, str], trusted: list[str]) -> str | None:
    peer = (scope.get("client") or (None, None))[0]
    if peer is None:
        return None
    nets = [ip_network(t, strict=False) for t in trusted]

    def is_trusted(addr: str) -> bool:
        try:
            a = ip_address(addr)
        except ValueError:
            return False
        return any(a in n for n in nets)

    if nets and is_trusted(peer) and "x-forwarded-for" in headers:
        hops = [h.strip() for h in headers["x-forwarded-for"].split(",") if h.strip()]
        for hop in reversed(hops):
            if not is_trusted(hop):
                return hop
    return str(peer)


async def _read_body(receive: Receive, cap: int) -> bytes:
    """The whole request body, or 413 file_too_large past `cap` bytes."""
    parts: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        part = message.get("body", b"")
        size += len(part)
        if size > cap:
            raise file_too_large(f"Request bodies are limited to {cap} bytes.", cap)
        parts.append(part)
        more = message.get("more_body", False)
    return b"".join(parts)


def _with_body(scope: Scope, body: bytes, receive: Receive) -> tuple[Scope, Receive]:
    """The scope with a Content-Length for `body` (and no Transfer-Encoding), and a receive replaying it."""
    raw = [(k, v) for k, v in scope.get("headers", []) if k.lower() not in (b"content-length", b"transfer-encoding")]
    raw.append((b"content-length", str(len(body)).encode()))
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return {**scope, "headers": raw}, replay


class LevMiddleware:
    """Outermost layer: request id, body-size cap, response headers, activity log."""
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.base_url = (settings.base_url or "").rstrip("/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = uuid.uuid4().hex
        path: str = scope.get("path", "")
        surface = ("mcp" if path.startswith("/api/mcp") else "ops" if path in OPS_PATHS
                   else "rest" if path.startswith("/api/v1") else "web")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        info = context.RequestInfo(request_id=request_id, surface=surface,
                                   base_url=self.base_url or context.served_base_url(scope.get("scheme", "http"),
                                                                                     scope.get("server")),
                                   ip=_client_ip(scope, headers, self.settings.trusted_proxies))
        context.set_current(info)
        logs.new_context(request_id=request_id)
        status_holder = {"status": 500, "started": False}
        cap, too_large = self._body_cap(path)

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
                status_holder["started"] = True
                raw = list(message.get("headers", []))
                raw.append((b"x-request-id", request_id.encode()))
                for k, v in info.headers.items():
                    if not any(h[0].lower() == k.lower().encode() for h in raw):
                        raw.append((k.encode(), v.encode()))
                message = {**message, "headers": raw}
            await send(message)

        exempt = path.startswith(UPLOAD_PUT_PREFIX)
        if not exempt and path.startswith("/api/v1/") and "content-type" not in headers \
                and ("content-length" in headers or "transfer-encoding" in headers):
            # A body sent without Content-Type is read as the JSON every body operation takes (Connexion would
            # otherwise hand the handler raw bytes).
            headers["content-type"] = "application/json"
            scope = {**scope, "headers": [*scope.get("headers", []), (b"content-type", b"application/json")]}
        too_big = False
        declared = headers.get("content-length")
        if not exempt and declared and declared.isdigit() and int(declared) > cap:
            too_big = True
        elif not exempt and declared is None and "chunked" in headers.get("transfer-encoding", "").lower():
            # Connexion sees a body only through Content-Length: read the chunked body here (under the cap)
            # and hand it on with its length.
            try:
                body = await _read_body(receive, cap)
            except ApiError:
                err = too_large()
                await self._send_error(err, send_wrapper)
                self._log(scope, headers, info, status_holder["status"], started)
                return
            scope, receive = _with_body(scope, body, receive)
        received = 0

        async def receive_wrapper() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request" and not exempt:
                received += len(message.get("body", b""))
                if received > cap:
                    raise too_large()
            return message

        try:
            if too_big:
                await self._send_error(too_large(), send_wrapper)
            else:
                await self.app(scope, receive_wrapper, send_wrapper)
        except ApiError as err:
            if not status_holder["started"]:
                await self._send_error(err, send_wrapper)
        except Exception as exc:  # a bug: answer 500 with the request id, never a bare traceback
            log.exception("unhandled error outside the app")
            if not status_holder["started"]:
                await self._send_error(to_api_error(exc), send_wrapper)
        finally:
            self._log(scope, headers, info, status_holder["status"], started)

    def _body_cap(self, path: str) -> tuple[int, Callable[[], ApiError]]:
        """The body-size cap of a path and the 413 past it (an import file has its own, larger bound)."""
        if path == IMPORTS_PATH:
            limit = self.settings.import_max_bytes
            return limit + MULTIPART_SLACK, lambda: file_too_large(
                f"Import files are limited to {limit} bytes ({limit // (1 << 20)} MiB).", limit)
        cap = self.settings.max_body_bytes
        return cap, lambda: file_too_large(f"Request bodies are limited to {cap} bytes.", cap)

    async def _send_error(self, err: ApiError, send: Send) -> None:
        resp = error_response(err)
        body = resp.body if isinstance(resp.body, bytes) else str(resp.body).encode()
        raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        raw += [(k.encode(), v.encode()) for k, v in (resp.headers or {}).items()]
        await send({"type": "http.response.start", "status": err.status, "headers": raw})
        await send({"type": "http.response.body", "body": body})

    def _log(self, scope: Scope, headers: dict[str, str], info: context.RequestInfo, status: int,
             started: float) -> None:
        elapsed = time.perf_counter() - started
        path = scope.get("path", "")
        p = info.principal
        route = metric_route(scope.get("method", ""), path)
        try:
            metrics.observe_request(route, info.surface, status, elapsed)
        except Exception:  # metrics must never fail a request
            log.exception("could not record request metrics")
        if path in OPS_PATHS:
            return  # probes and scrapes: neither the activity log nor a request line
        request_log.info("request", route=route, surface=info.surface, status=status,
                         latency_ms=round(elapsed * 1000, 3), user_id=str(p.user_id) if p else None,
                         token_id=str(p.token_id) if p else None)
        try:
            rt = runtime.get_runtime()
        except RuntimeError:
            return
        method = info.method or f"{scope.get('method', '')} {route_template(path)}"
        rt.activity.record({
            "ts": clock.now(),
            "user_id": None if info.unlogged else p.user_id if p else info.user_id,
            "token_id": p.token_id if p else None,
            "surface": info.surface,
            "method": method[:300],
            "status": status,
            "ip": info.ip,
            "user_agent": (headers.get("user-agent") or "")[:500] or None,
            "result_count": info.result_count,
            "latency_ms": round(elapsed * 1000, 3),
            "query": (info.query or None) and info.query[:1000],
            "request_id": info.request_id,
        })


def create_app(settings: Settings | None = None) -> ASGIApp:
    """The ASGI application: Connexion (REST from openapi.yaml, MCP route) wrapped by LevMiddleware."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        # Ingest batches are embedded on threads of lower CPU priority, never ahead of the searches' embeddings.
        metrics.configure(settings)
        rt = await runtime.start(settings, ingest_nice=settings.ingest_embed_nice)
        worker = None
        if settings.workers_inline:
            worker = make_worker(rt.redis_url, own_runtime=False)
            task = asyncio.get_running_loop().create_task(worker.async_run())
        try:
            yield
        finally:
            if worker is not None:
                await stop_gracefully(worker, settings.shutdown_grace_sec)
                task.cancel()
            await runtime.stop()
            metrics.mark_process_dead()

    app = AsyncApp(__name__, lifespan=lifespan)
    app.add_api(
        connexion_spec(),
        base_path="",
        pythonic_params=True,
        resolver=OperationResolver(),
        swagger_ui_options=SwaggerUIOptions(swagger_ui=False, serve_spec=False),
        strict_validation=True,
        validate_responses=False,
        validator_map=validator_map(),
        security_map=security_map(),
    )
    app.add_url_rule("/api/mcp", "mcp", mcp_handler.endpoint, methods=["GET", "POST", "DELETE"])
    app.add_url_rule("/api/v1/docs", "docs", spec_handler.api_docs, methods=["GET"])
    app.add_url_rule("/api/v1/docs/redoc.standalone.js", "redoc", spec_handler.redoc_js, methods=["GET"])

    app.add_url_rule("/healthz", "healthz", ops.healthz, methods=["GET"])
    app.add_url_rule("/readyz", "readyz", ops.readyz, methods=["GET"])
    app.add_url_rule("/metrics", "metrics", ops.metrics_text, methods=["GET"])
    pages.add_routes(app)
    oauth_handler.add_routes(app)
    for exc_type in (ApiError, ProblemException, HTTPException, Exception):
        app.add_error_handler(exc_type, handle_error)
    return LevMiddleware(app, settings)
