"""The authorization server's HTTP glue (not REST operations: RFC-defined bodies and errors, so outside
openapi.yaml like /api/mcp): the metadata documents, the consent page, and the token, registration and
revocation endpoints. Rules live in lev.oauth.server and lev.oauth.clients."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from lev.auth import accounts
from lev.auth.policy import Principal
from lev.core import context, pagepolicy
from lev.core.errors import ApiError, not_signed_in
from lev.handlers import deps, pages
from lev.oauth import grants
from lev.oauth import server as oauth
from lev.oauth.clients import MAX_REGISTRATION_BYTES, OAuthError, authenticate_client, register
from lev.oauth.consent import describe
from lev.runtime import get_runtime
from lev.store import folders as folder_store

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
CORS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
        "Access-Control-Allow-Headers": "Authorization, Content-Type, MCP-Protocol-Version"}
FRAMES = {"X-Frame-Options": "DENY"}  # and the pages' Content-Security-Policy (frame-ancestors 'none'), see below
EXPIRY_LABELS = {365: "1 year", 90: "90 days", 30: "30 days", 7: "7 days", 1: "1 day"}


def _base(request: Request) -> str:
    return oauth.public_base(deps().settings, request.headers.get("host"))


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers={**CORS, **NO_STORE, **(headers or {})})


def _oauth_error(err: OAuthError) -> JSONResponse:
    extra = {"WWW-Authenticate": 'Basic realm="lev"'} if err.status == 401 else {}
    return _json({"error": err.error, "error_description": err.description}, err.status, extra)


async def preflight(_request: Request) -> Response:
    return Response(status_code=204, headers={**CORS, "Access-Control-Max-Age": "600"})


async def post_only(_request: Request) -> Response:
    return Response(status_code=405, headers={"Allow": "POST, OPTIONS"})


async def protected_resource(request: Request) -> Response:
    """RFC 9728 metadata of the MCP resource (served at the path-specific and at the root well-known URL)."""
    return JSONResponse(oauth.protected_resource_metadata(_base(request)), headers=CORS)


async def protected_rest_resource(request: Request) -> Response:
    """RFC 9728 metadata of the REST API as a resource (the browser extension's grants are for it)."""
    return JSONResponse(oauth.protected_resource_metadata(_base(request), oauth.REST_PATH), headers=CORS)


async def authorization_server(request: Request) -> Response:
    """RFC 8414 metadata of the authorization server."""
    return JSONResponse(oauth.authorization_server_metadata(_base(request)), headers=CORS)


async def _form(request: Request) -> dict[str, str]:
    """A form-encoded OAuth request's parameters; a repeated parameter or another body type is invalid_request."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise OAuthError("invalid_request", "Send the parameters as application/x-www-form-urlencoded.")
    form = await request.form()
    keys = list(form.keys())
    if len(keys) != len(set(keys)):
        raise OAuthError("invalid_request", "A parameter is repeated.")
    return {k: v for k, v in form.items() if isinstance(v, str)}


async def token(request: Request) -> Response:
    """The token endpoint: authorization_code and refresh_token grants."""
    try:
        form = await _form(request)
        client = await authenticate_client(deps().db, deps().outbound, form, request.headers.get("authorization"))
        grant_type = form.get("grant_type")
        if grant_type == "authorization_code":
            return _json(await grants.exchange_code(deps().db, deps().settings, client, form))
        if grant_type == "refresh_token":
            return _json(await grants.refresh_grant(deps().db, client, form))
        raise OAuthError("unsupported_grant_type", "grant_type must be authorization_code or refresh_token.")
    except OAuthError as err:
        return _oauth_error(err)


async def revoke(request: Request) -> Response:
    """RFC 7009 revocation: the whole grant goes; 200 whether or not the token was known."""
    try:
        form = await _form(request)
        client = await authenticate_client(deps().db, deps().outbound, form, request.headers.get("authorization"))
        await grants.revoke(deps().db, client, form)
    except OAuthError as err:
        return _oauth_error(err)
    return Response(status_code=200, headers={**CORS, **NO_STORE})


async def register_client(request: Request) -> Response:
    """RFC 7591 dynamic client registration, a budget per source address (429 with Retry-After past it)."""
    info = context.current()
    try:
        await get_runtime().limiter.check_client_registration(info.ip if info else None)
    except ApiError as err:
        body = {"error": "rate_limited", "error_description": err.message or err.code}
        return _json(body, err.status, err.headers)
    try:
        return _json(await register(deps().db, await _body(request, MAX_REGISTRATION_BYTES)), 201)
    except OAuthError as err:
        return _oauth_error(err)


async def _body(request: Request, cap: int) -> bytes:
    """The request body, read no further than one byte past `cap` (register() refuses what is longer)."""
    body = b""
    async for part in request.stream():
        body += part
        if len(body) > cap:
            break
    return body


# ------------------------------------------------------------------------------------------------ consent


async def _session(request: Request) -> Principal | None:
    try:
        async with deps().db.read_session() as s:
            return await accounts.authenticate_session(s, request.cookies.get(accounts.COOKIE_NAME))
    except ApiError:
        return None


def _page_error(request: Request, err: oauth.PageError | ApiError, p: Principal | None) -> Response:
    error, description, status = (err.error, err.description, 400) if isinstance(err, oauth.PageError) \
        else (err.code, err.message or err.code, err.status)
    response = pages._render("oauth_error.html", request, p, status=status, error=error, description=description)
    response.headers.update(FRAMES)
    return response


async def _consent(request: Request, p: Principal, req: oauth.AuthRequest, params: dict[str, str],
                   choice: dict[str, Any], error: str | None = None, status: int = 200) -> Response:
    async with deps().db.read_session() as s:
        folders = await folder_store.list_visible(s, p.scope)
    response = pages._render(
        "consent.html", request, p, status=status, client=describe(req.client, req.redirect_uri),
        hidden=req.hidden(params),
        resource=req.resource.rstrip("/"), rest=req.resource.rstrip("/") == oauth.resource_url(req.issuer,
                                                                                               oauth.REST_PATH),
        room=await oauth.consent_room(deps().db, deps().settings, p), folders=folders, write_asked=req.write_asked,
        choice=choice,
        expiry=[(d, EXPIRY_LABELS[d]) for d in oauth.EXPIRY_CHOICES], error=error)
    response.headers.update(FRAMES)
    # the form's answer redirects to the client: its origin (or native-app scheme) joins form-action
    response.headers["Content-Security-Policy"] = pagepolicy.content_security_policy(
        form_action=[pagepolicy.source_of(req.redirect_uri)])
    return response


async def authorize(request: Request) -> Response:
    """GET: check the authorization request, then sign-in (the sign-in page comes back here) and the consent page.
    POST: the consent form's answer: "Allow" sends a code back to the client, "Deny" access_denied."""
    p = await _session(request)
    if request.method == "POST":
        form = await request.form()
        params = {k: v for k, v in form.items() if isinstance(v, str)}
        fields: dict[str, Any] = {**params, "folder_ids": [v for v in form.getlist("folder_ids") if isinstance(v, str)]}
    else:
        params = dict(request.query_params)
    try:
        req = await oauth.check_request(deps().db, deps().outbound, params, _base(request))
    except oauth.PageError as err:
        return _page_error(request, err, p)
    if p is None:
        if request.method == "POST":
            return _page_error(request, not_signed_in(), None)
        target = f"{request.url.path}?{request.url.query}"
        return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303, headers=NO_STORE)
    default = {"access": "all", "folder_ids": [], "write": False, "kb_only": True, "expires_in_days": 365}
    if request.method == "GET":
        return await _consent(request, p, req, params, default)
    try:
        accounts.check_csrf(p, "POST", params.get("csrf_token"))
    except ApiError as err:
        return _page_error(request, err, p)
    if params.get("decision") != "allow":
        return RedirectResponse(req.redirect(error="access_denied", error_description="The user denied access."),
                                status_code=302, headers=NO_STORE)
    shown = {**default, "access": fields.get("access"), "folder_ids": fields["folder_ids"],
             "write": "write" in fields, "kb_only": "kb_only" in fields}
    room = await oauth.consent_room(deps().db, deps().settings, p)
    if not room["allowed"]:
        return await _consent(request, p, req, params, shown, status=402,
                              error=f"payment_required: tier {room['tier']}, cap {room['cap']}, used {room['used']}.")
    async with deps().db.read_session() as s:
        owned = {f["id"] for f in await folder_store.list_visible(s, p.scope)}
    try:
        choice = oauth.consent_choice(fields, req, owned)
    except ApiError as err:
        return await _consent(request, p, req, params, shown, error=err.message, status=400)
    try:
        answer = await oauth.issue_code(deps().db, p.user_id, accounts.principal_session(p), req, choice)
    except ApiError as err:  # the session ended meanwhile (a password change)
        return _page_error(request, err, None)
    return RedirectResponse(answer, status_code=302, headers=NO_STORE)


def add_routes(app: Any) -> None:
    """Register the authorization server's routes on the Connexion app."""
    app.add_url_rule(oauth.PRM_PATH + oauth.MCP_PATH, "oauth_prm_mcp", protected_resource, methods=["GET"])
    app.add_url_rule(oauth.PRM_PATH, "oauth_prm", protected_resource, methods=["GET"])
    app.add_url_rule(oauth.PRM_PATH + oauth.REST_PATH, "oauth_prm_rest", protected_rest_resource, methods=["GET"])
    app.add_url_rule(oauth.AS_PATH, "oauth_as", authorization_server, methods=["GET"])
    app.add_url_rule(oauth.AUTHORIZE_PATH, "oauth_authorize", authorize, methods=["GET", "POST"])
    for path, name, fn in ((oauth.TOKEN_PATH, "token", token), (oauth.REGISTER_PATH, "register", register_client),
                           (oauth.REVOKE_PATH, "revoke", revoke)):
        app.add_url_rule(path, f"oauth_{name}", fn, methods=["POST"])
        app.add_url_rule(path, f"oauth_{name}_get", post_only, methods=["GET"])
    for path in (oauth.PRM_PATH + oauth.MCP_PATH, oauth.PRM_PATH + oauth.REST_PATH, oauth.PRM_PATH, oauth.AS_PATH,
                 oauth.TOKEN_PATH,
                 oauth.REGISTER_PATH, oauth.REVOKE_PATH):
        app.add_url_rule(path, f"oauth_preflight{path}", preflight, methods=["OPTIONS"])
