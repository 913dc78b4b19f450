"""The outermost layer of every request (`LevMiddleware`): request id, the base URL, the body-size caps, response
headers, the request's metrics, log line and activity entry; and the route names they use."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterable
from functools import lru_cache
from ipaddress import ip_address, ip_network

from connexion.lifecycle import ConnexionResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lev import runtime
from lev.core import clock, context, pagepolicy
from lev.core.contract import operations
from lev.core.errors import ApiError, file_too_large, rest_body, rest_headers, to_api_error
from lev.core.settings import Settings
from lev.ingest.request import MAX_HTML_BYTES, MAX_PAGE_BODY_BYTES
from lev.oauth import server as oauth
from lev.ops import logs, metrics

log = logs.get_logger("lev")
request_log = logs.get_logger("lev.request")

UPLOAD_PUT_PREFIX = "/api/v1/uploads/put/"
IMPORTS_PATH = "/api/v1/imports"
JSON_API_PREFIXES = ("/api/v1/", "/api/account")  # the documented APIs whose bodies are JSON
INGEST_PATH = "/api/v1/ingest"  # carries a captured page's HTML (kind page): a larger body cap
MULTIPART_SLACK = 64 * 1024  # an import's form around its file: boundaries and part headers
OPS_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
OAUTH_PATHS = frozenset({oauth.PRM_PATH + oauth.MCP_PATH, oauth.PRM_PATH + oauth.REST_PATH, oauth.PRM_PATH,
                         oauth.AS_PATH, oauth.AUTHORIZE_PATH, oauth.TOKEN_PATH, oauth.REGISTER_PATH, oauth.REVOKE_PATH})


def error_response(err: ApiError) -> ConnexionResponse:
    """An error as Connexion's response: the body and headers shaped by lev.core.errors."""
    info = context.current()
    body = rest_body(err, info.request_id if info is not None else None)
    return ConnexionResponse(status_code=err.status, body=json.dumps(body), headers=rest_headers(err),
                             content_type="application/json")

PUBLIC_PREFIX, PUBLIC_PAGE, PUBLIC_FEED = "/p/", "/p/{slug}", "/p/{slug}/feed.atom"
SECRET_PAGES = {"/invite/": "/invite/{code}", "/verify-email/": "/verify-email/{code}"}  # links that are secrets
_ROUTES: list[tuple[re.Pattern[str], str]] = []
_TEMPLATES: set[str] = set()
_PAGE_ROUTES: list[tuple[re.Pattern[str], str]] = []


def _matcher(template: str) -> re.Pattern[str]:
    """The paths a route template (`/items/{id}`) stands for: each `{name}` one path segment."""
    return re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$")


@lru_cache(maxsize=4096)  # a path's template never changes: the document is loaded once
def route_template(path: str) -> str:
    """The documented route a path matches (`/api/v1/items/{id}`), for the activity log; else the raw path."""
    if not _ROUTES:
        for op in operations().values():
            _ROUTES.append((_matcher(op["path"]), op["path"]))
        _TEMPLATES.update(t for _, t in _ROUTES)
    for compiled, template in (*_ROUTES, *_PAGE_ROUTES):
        if compiled.match(path):
            return template
    if path.startswith(PUBLIC_PREFIX):  # a published folder's slug is its secret URL: never logged
        return PUBLIC_FEED if path.endswith("/feed.atom") else PUBLIC_PAGE
    for prefix, secret in SECRET_PAGES.items():
        if path.startswith(prefix):
            return secret
    return path[:200]


def name_pages(paths: Iterable[str]) -> None:
    """The web pages' route templates (`/folders/{id}`), named in the request log and the metrics like the API's;
    called before the first request."""
    for template in paths:
        if template not in _TEMPLATES:
            _PAGE_ROUTES.append((_matcher(template), template))
            _TEMPLATES.add(template)
    route_template.cache_clear()


def allowed_methods(path: str) -> list[str]:
    """The documented methods of the route `path` matches (the MCP route answers its own 405s)."""
    template = route_template(path)
    return sorted({op["method"] for op in operations().values() if op["path"] == template})


def metric_route(method: str, path: str) -> str:
    """A bounded route label for metrics: the documented template, the MCP or ops path, else `other`."""
    if path in OPS_PATHS or path in OAUTH_PATHS or path == "/api/mcp":
        return f"{method} {path}"
    if path.startswith((PUBLIC_PREFIX, *SECRET_PAGES)):
        return f"{method} {route_template(path)}"
    if path.startswith(UPLOAD_PUT_PREFIX):
        return f"{method} {UPLOAD_PUT_PREFIX}{{path}}"
    template = route_template(path)
    return f"{method} {template}" if template != path[:200] or path in _TEMPLATES else "other"

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
        self._policy: str | None = None

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
                html = any(k.lower() == b"content-type" and v.startswith(b"text/html") for k, v in raw)
                raw = pagepolicy.add_headers(raw, page=surface == "web" or html, policy=self._page_policy())
                raw.append((b"x-request-id", request_id.encode()))
                for k, v in info.headers.items():
                    if not any(h[0].lower() == k.lower().encode() for h in raw):
                        raw.append((k.encode(), v.encode()))
                message = {**message, "headers": raw}
            await send(message)

        exempt = path.startswith(UPLOAD_PUT_PREFIX)
        if not exempt and path.startswith(JSON_API_PREFIXES) and "content-type" not in headers \
                and ("content-length" in headers or "transfer-encoding" in headers):
            # A body sent without Content-Type is read as the JSON every body operation of the REST and account
            # APIs takes (Connexion would otherwise hand the handler raw bytes: a 500).
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

    def _page_policy(self) -> str:
        """Pages' Content-Security-Policy, with the object store's origin (uploads, media) when it is another."""
        if self._policy is None:
            self._policy = pagepolicy.content_security_policy(pagepolicy.store_origins(runtime.get_object_store))
        return self._policy

    def _body_cap(self, path: str) -> tuple[int, Callable[[], ApiError]]:
        """The body-size cap of a path and the 413 past it (an import file and a captured page have their own, larger
        bounds)."""
        if path == IMPORTS_PATH:  # a ZIP of a folder may be larger than the other import files (their handler's cap)
            limit = max(self.settings.import_max_bytes, self.settings.import_archive_max_bytes)
            return limit + MULTIPART_SLACK, lambda: file_too_large(
                f"Import files are limited to {limit} bytes ({limit // (1 << 20)} MiB).", limit)
        if path == INGEST_PATH:
            html = MAX_HTML_BYTES
            return max(self.settings.max_body_bytes, MAX_PAGE_BODY_BYTES), lambda: file_too_large(
                f"A page's HTML is limited to {html} bytes (5 MiB); this request is larger than any such page.", html)
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
