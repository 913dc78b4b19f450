"""The composition root's app: the Connexion app with the contract, the auth hooks, the error mapping, the pages and the
lifespan that opens the runtime; wrapped in `lev.middleware.LevMiddleware`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from connexion.exceptions import ProblemException
from connexion.lifecycle import ConnexionRequest, ConnexionResponse
from connexion.options import SwaggerUIOptions
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp

from lev import runtime
from lev.auth import accounts
from lev.auth import principal_cache as principals
from lev.core import context
from lev.core.connexion_app import ConnexionApp
from lev.core.contract import OperationResolver, connexion_spec, operations, security_map, validator_map
from lev.core.errors import ApiError, not_signed_in, to_api_error
from lev.core.settings import Settings, get_settings
from lev.handlers import mcp as mcp_handler
from lev.handlers import oauth as oauth_handler
from lev.handlers import ops, pages, public, pwa
from lev.handlers import spec as spec_handler
from lev.limits.ratelimit import HourlyRider
from lev.mcp import card
from lev.middleware import LevMiddleware, allowed_methods, error_response, name_pages
from lev.oauth import server as oauth
from lev.ops import logs, metrics
from lev.tasks.worker import make_worker, stop_gracefully

log = logs.get_logger("lev")
request_log = logs.get_logger("lev.request")

async def handle_error(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    err = to_api_error(exc)
    info = context.current()
    if err.code == "missing_bearer_token" and info is not None and info.surface == "web":
        err = not_signed_in()
    if err.status == 405:  # RFC 9110: a 405 names the methods the route has
        err.headers["Allow"] = ", ".join(allowed_methods(request.url.path))
    if (err.status == 404 and info is not None and info.surface == "web" and request.method in ("GET", "HEAD")
            and "text/html" in request.headers.get("accept", "")):  # a browser at an address with no page
        page = await pages.not_found_page(request)
        return ConnexionResponse(status_code=404, body=page.body, content_type="text/html; charset=utf-8",
                                 headers={"Cache-Control": "no-store"})
    return error_response(err)


_LIMIT_CLASS: dict[str, str | None] = {}


def limit_class(operation_id: str | None) -> str | None:
    if not _LIMIT_CLASS:
        for op_id, op in operations().items():
            _LIMIT_CLASS[op_id] = op["operation"].get("x-lev-limit")
    return _LIMIT_CLASS.get(operation_id or "")


async def bearer_info(token: str, request: Any = None) -> dict[str, Any]:
    """Connexion's bearer hook: authenticate (an OAuth grant only if it was issued for the REST API), then apply the
    operation's rate-limit class."""
    host = request.headers.get("host") if request is not None else None
    d, limiter = runtime.deps(), runtime.get_runtime().limiter
    op_id = None
    if request is not None:
        op_id = request.scope.get("extensions", {}).get("connexion_routing", {}).get("operation_id")
    rider = HourlyRider(limiter, limit_class(op_id))  # the hourly count rides with the auth epoch's read
    principal = await principals.authenticate_bearer(
        d.db, token, audience=oauth.resource_url(oauth.public_base(d.settings, host), oauth.REST_PATH), rider=rider)
    info = context.current()
    if info is not None:
        info.principal = principal
    logs.bind(user_id=principal.user_id, token_id=principal.token_id)
    await limiter.apply(principal, limit_class(op_id), rider)
    return {"sub": str(principal.user_id), "principal": principal}


async def session_info(cookie_value: str, request: Any = None) -> dict[str, Any]:
    """Connexion's cookie hook: a signed-in browser session acts as its user (surface `web`); unsafe methods
    need the session's X-CSRF-Token (403 csrf_failed)."""
    async with runtime.deps().db.read_session() as s:
        principal = await accounts.authenticate_session(s, cookie_value)
    if request is not None:
        accounts.check_csrf(principal, request.method, request.headers.get(accounts.CSRF_HEADER))
    info = context.current()
    if info is not None:
        info.principal = principal
        info.surface = "web"
    if request is not None:  # a session's writes count against its user's hourly budgets, as a token's do
        op_id = request.scope.get("extensions", {}).get("connexion_routing", {}).get("operation_id")
        await runtime.get_runtime().limiter.apply(principal, limit_class(op_id))
    return {"sub": str(principal.user_id), "principal": principal}


def create_app(settings: Settings | None = None) -> ASGIApp:
    """The ASGI application: Connexion (REST from openapi.yaml, MCP route) wrapped by LevMiddleware."""
    settings = settings or get_settings()
    metrics.configure(settings)  # before anything counts: every process of the stack shares the directory

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        # Ingest batches are embedded on threads of lower CPU priority, never ahead of the searches' embeddings.
        rt = await runtime.start(settings, ingest_nice=settings.ingest_embed_nice)
        worker = None
        if settings.workers_inline:
            worker = make_worker(rt.redis_url, own_runtime=False)
            task = asyncio.get_running_loop().create_task(worker.async_run())
        try:
            yield
        finally:  # within LEV_SHUTDOWN_GRACE_SEC of the signal, whatever part is down (lev.supervisor)
            if worker is not None:
                await stop_gracefully(worker, runtime.shutdown_budget(settings.shutdown_grace_sec))
                task.cancel()
            await runtime.stop(timeout_sec=2.0)
            metrics.mark_process_dead()

    app = ConnexionApp(__name__, lifespan=lifespan)
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
    for path in card.PATHS:
        app.add_url_rule(path, f"mcp_card{path}", mcp_handler.server_card, methods=["GET"])
    app.add_url_rule("/api/v1/docs", "docs", spec_handler.api_docs, methods=["GET"])
    app.add_url_rule("/api/v1/docs/redoc.standalone.js", "redoc", spec_handler.redoc_js, methods=["GET"])

    app.add_url_rule("/healthz", "healthz", ops.healthz, methods=["GET"])
    app.add_url_rule("/readyz", "readyz", ops.readyz, methods=["GET"])
    app.add_url_rule("/metrics", "metrics", ops.metrics_text, methods=["GET"])
    pages.add_routes(app)
    name_pages(pages.PATHS)
    public.add_routes(app)
    pwa.add_routes(app)
    oauth_handler.add_routes(app)
    for exc_type in (ApiError, ProblemException, HTTPException, Exception):
        app.add_error_handler(exc_type, handle_error)
    return LevMiddleware(app, settings)
