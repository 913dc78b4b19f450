"""Lev as the OAuth 2.1 authorization server of its own MCP resource (`{base}/api/mcp`): metadata (RFC 9728,
RFC 8414), the bearer challenge, authorization requests (PKCE S256, exact redirect URIs, RFC 8707 resource,
RFC 9207 iss), the consent page's figures and the codes it issues; the token endpoint is `lev.oauth.grants`.

A grant is a row of `tokens` (kind 'oauth') minted by the one mint rule (`lev.auth.policy.mint`), so capability, scope,
kb_only, expiry, revocation, rate limits, write caps and the activity log treat it like a hand-minted token.
"""

from __future__ import annotations

import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Any
from urllib.parse import urlencode, urlsplit

from lev.auth import principal_cache as principals
from lev.auth.policy import Principal, hash_token, parse_bearer
from lev.core import clock, context
from lev.core.contract import mcp_tools
from lev.core.errors import ApiError, capability_denied, invalid_body, jsonrpc_response, not_signed_in
from lev.core.settings import Settings
from lev.limits.tiers import Tiers, token_room
from lev.oauth.clients import SCOPES, Client, OAuthError, load_client, redirect_matches
from lev.plumbing.ports import Outbound
from lev.store import oauth as oauth_store
from lev.store import sessions as session_store
from lev.store.db import Database

READ, WRITE = SCOPES
MCP_PATH = "/api/mcp"
REST_PATH = "/api/v1"  # the REST API is a resource of its own (the browser extension's grants are for it)
PRM_PATH = "/.well-known/oauth-protected-resource"
AS_PATH = "/.well-known/oauth-authorization-server"
AUTHORIZE_PATH, TOKEN_PATH, REGISTER_PATH, REVOKE_PATH = "/oauth/authorize", "/oauth/token", "/oauth/register", \
    "/oauth/revoke"
CODE_TTL_SEC = 300
EXPIRY_CHOICES = (365, 90, 30, 7, 1)
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")


def public_base(settings: Settings, host_header: str | None) -> str:
    """The base URL clients see: LEV_BASE_URL, else the address served (`localhost` when the client said so on a
    loopback listener, so a client that was given http://localhost:PORT/api/mcp finds its resource)."""
    base = context.base_url()
    if settings.base_url or not host_header:
        return base
    parts = urlsplit(base)
    try:
        asked = urlsplit(f"//{host_header}")
        same_port = asked.port == parts.port
    except ValueError:  # a Host header that is no host[:port]
        return base
    if parts.hostname in ("127.0.0.1", "::1") and asked.hostname == "localhost" and same_port:
        return f"{parts.scheme}://localhost:{parts.port}" if parts.port else f"{parts.scheme}://localhost"
    return base


def resource_url(base: str, path: str = MCP_PATH) -> str:
    return f"{base}{path}"


def resource_metadata_url(base: str, path: str = MCP_PATH) -> str:
    return f"{base}{PRM_PATH}{path}"


def challenge(base: str, err: ApiError | None = None, *, insufficient: bool = False) -> str:
    """`WWW-Authenticate` of /api/mcp refusals: where the resource metadata is and which scopes to ask for; with an
    RFC 6750 error for a bad token (none when there was no token) or for a grant lacking a scope."""
    parts = ['Bearer realm="lev"']
    if insufficient:
        parts += ['error="insufficient_scope"', 'error_description="This grant is read-only; allow lev:write"']
    elif err is not None and err.code == "invalid_token":
        parts.append('error="invalid_token"')
    parts += [f'resource_metadata="{resource_metadata_url(base)}"', f'scope="{" ".join(SCOPES)}"']
    return ", ".join(parts)


def protected_resource_metadata(base: str, path: str = MCP_PATH) -> dict[str, Any]:
    """RFC 9728 metadata of the MCP resource, or (path `/api/v1`) of the REST API."""
    name = "Lev knowledge base" if path == MCP_PATH else "Lev REST API"
    return {"resource": resource_url(base, path), "authorization_servers": [base], "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"], "resource_name": name,
            "resource_documentation": f"{base}/api/v1/docs"}


def authorization_server_metadata(base: str) -> dict[str, Any]:
    methods = ["none", "client_secret_basic", "client_secret_post"]
    return {
        "issuer": base, "authorization_endpoint": base + AUTHORIZE_PATH, "token_endpoint": base + TOKEN_PATH,
        "registration_endpoint": base + REGISTER_PATH, "revocation_endpoint": base + REVOKE_PATH,
        "scopes_supported": list(SCOPES), "response_types_supported": ["code"], "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": methods, "revocation_endpoint_auth_methods_supported": methods,
        "code_challenge_methods_supported": ["S256"], "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }


async def authenticate_mcp(db: Database, authorization: str | None, base: str) -> Principal:
    """The principal of an /api/mcp request: a pasted `lev_` token, or an OAuth access token issued for this
    resource; 401 missing_bearer_token / invalid_token otherwise."""
    return await principals.authenticate_bearer(db, parse_bearer(authorization), audience=resource_url(base))


@lru_cache(maxsize=1)
def _tool_capabilities() -> dict[str, str]:
    return {t["name"]: t["capability"] for t in mcp_tools()["tools"]}


def transport_scope_refusal(principal: Principal, headers: Any, document: Any, base: str
                            ) -> tuple[dict[str, Any], dict[str, str]] | None:
    """For an OAuth grant calling a tool its scope does not cover, when the request names the tool in its HTTP
    headers (`Mcp-Method: tools/call`, `Mcp-Name`, revision 2026-07-28): the HTTP 403 insufficient_scope answer
    (JSON-RPC body with the contract's -32605 capability_denied, and the challenge; `document` is the parsed body,
    None when it was no JSON). Otherwise None: the tool call is refused inside JSON-RPC as for every token."""
    if "oauth_client" not in principal.extra or headers.get("mcp-method") != "tools/call":
        return None
    needed = _tool_capabilities().get(headers.get("mcp-name") or "", "read")
    if needed in principal.capabilities:
        return None
    have = sorted(principal.capabilities)
    err = capability_denied(f"This grant cannot {needed}: it was allowed {', '.join(have)}.", required=needed,
                            have=have)
    req_id = document.get("id") if isinstance(document, dict) else None
    if not isinstance(req_id, (str, int)) or isinstance(req_id, bool):
        req_id = None
    return jsonrpc_response(err, req_id), {"WWW-Authenticate": challenge(base, insufficient=True)}


# ------------------------------------------------------------------------------------------------ authorization


class PageError(Exception):
    """An authorization request that is not valid: shown to the user on Lev's own page, never answered by redirecting
    (RFC 9700 section 4.11.2: the redirect URI of a dynamically registered or metadata-document client is unvetted;
    redirecting errors to it would make Lev an open redirector). Only a valid request of a signed-in user ever
    redirects, with a code or access_denied."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


@dataclass(frozen=True)
class AuthRequest:
    client: Client
    redirect_uri: str
    state: str | None
    code_challenge: str
    resource: str
    write_asked: bool
    issuer: str

    def redirect(self, **params: str) -> str:
        """The client's redirect URI with the answer, `state` and RFC 9207 `iss`."""
        query = {**params, **({"state": self.state} if self.state is not None else {}), "iss": self.issuer}
        sep = "&" if urlsplit(self.redirect_uri).query else "?"
        return f"{self.redirect_uri}{sep}{urlencode(query)}"

    def hidden(self, params: dict[str, str]) -> dict[str, str]:
        """The request's own parameters, carried through the consent form."""
        keys = ("response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method",
                "scope", "resource")
        return {k: params[k] for k in keys if k in params}


MAX_STATE_CHARS = 2000


async def check_request(db: Database, outbound: Outbound, params: dict[str, str], base: str) -> AuthRequest:
    """Validate an authorization request for its client; anything wrong is a `PageError` (see there)."""
    try:
        client = await load_client(db, outbound, params.get("client_id"), fresh=True)
    except OAuthError as err:
        raise PageError("invalid_request", err.description) from None
    redirect_uri = params.get("redirect_uri", "")
    if not redirect_uri or not redirect_matches(client.redirect_uris, redirect_uri):
        raise PageError("invalid_request", "redirect_uri is missing or not registered for this client.")
    req = AuthRequest(client=client, redirect_uri=redirect_uri, state=params.get("state"),
                      code_challenge=params.get("code_challenge", ""), resource=params.get("resource", ""),
                      write_asked=WRITE in params.get("scope", " ".join(SCOPES)).split(), issuer=base)
    if params.get("response_type") != "code":
        raise PageError("unsupported_response_type", "response_type must be code.")
    if params.get("code_challenge_method") != "S256" or not _CHALLENGE.match(req.code_challenge):
        raise PageError("invalid_request", "PKCE is required: code_challenge (43 characters) with "
                                           "code_challenge_method S256.")
    if not req.resource:
        raise PageError("invalid_request", f"resource is required (RFC 8707): {resource_url(base)}.")
    if req.resource.rstrip("/") not in (resource_url(base), resource_url(base, REST_PATH)):
        raise PageError("invalid_target", f"This server issues tokens only for {resource_url(base)} (MCP) and "
                                          f"{resource_url(base, REST_PATH)} (REST).")
    if req.state is not None and len(req.state) > MAX_STATE_CHARS:
        raise PageError("invalid_request", f"state is longer than {MAX_STATE_CHARS} characters.")
    return req


def consent_choice(form: dict[str, Any], req: AuthRequest, folder_ids: set[str]) -> dict[str, Any]:
    """The access the user chose on the consent page, checked: folders they own, write only if the client asked,
    an offered expiry. 400 invalid_body (shown on the page) otherwise."""
    chosen = [f for f in form.get("folder_ids", []) if f]
    if form.get("access") == "folders":
        if not chosen:
            raise invalid_body("Choose at least one folder, or the whole library.")
        if not set(chosen) <= folder_ids:
            raise invalid_body("Some chosen folders are not yours.")
    else:
        chosen = []
    days = form.get("expires_in_days", "365")
    if days not in {str(d) for d in EXPIRY_CHOICES}:  # not isdigit()+int(): "²" is a digit int() refuses
        raise invalid_body("Choose one of the offered auto-revoke periods.")
    write = req.write_asked and form.get("write") in ("on", "true", "1")
    return {"write": write, "folder_ids": chosen, "kb_only": form.get("kb_only") in ("on", "true", "1"),
            "expires_in_days": int(days), "client_name": req.client.name}


async def issue_code(db: Database, user_id: uuid.UUID, session: bytes, req: AuthRequest,
                     choice: dict[str, Any]) -> str:
    """Store a one-time code (its hash) for the user's choice; the URL to send the browser back to. The browser
    session that allowed it is locked meanwhile: a password change ending it either waits for the code (and then
    voids it) or has ended it already (401 not_signed_in)."""
    code = secrets.token_urlsafe(32)
    async with db.transaction() as s:
        if not await session_store.lock_live(s, session):
            raise not_signed_in()
        await oauth_store.insert_code(s, code_hash=hash_token(code), user_id=user_id, client_id=req.client.client_id,
                                      redirect_uri=req.redirect_uri, code_challenge=req.code_challenge,
                                      resource=req.resource.rstrip("/"), choice=choice,
                                      expires_at=clock.now() + timedelta(seconds=CODE_TTL_SEC))
    return req.redirect(code=code)


async def consent_room(db: Database, settings: Settings, principal: Principal) -> dict[str, Any]:
    """The tier figures the consent page shows (the 402's tier, cap, used); `allowed` is false at the cap."""
    async with db.read_session() as s:
        user = {"id": principal.user_id, "tier": principal.tier}
        room = await token_room(s, Tiers.from_settings(settings), user)
    return {"tier": room.tier, "cap": room.cap, "used": room.used, "allowed": room.allowed}
