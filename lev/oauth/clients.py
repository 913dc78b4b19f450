"""OAuth clients of Lev's authorization server: Dynamic Client Registration (RFC 7591), Client ID Metadata
Documents (an https URL as client_id, fetched through the SSRF guard, validated and cached), the redirect URI
rules, and client authentication at the token and revocation endpoints."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import re
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
from pydantic import ValidationError

from lev.core import clock, jsonguard, weburl
from lev.core.errors import ApiError
from lev.net.guard import guarded_client
from lev.plumbing.ports import Outbound
from lev.store import oauth as oauth_store
from lev.store.db import Database

SCOPES = ("lev:read", "lev:write")
SECRET_METHODS = ("client_secret_basic", "client_secret_post")
AUTH_METHODS = ("none", *SECRET_METHODS)
MAX_DOCUMENT_BYTES = 5 * 1024  # the CIMD draft's recommended ceiling
CACHE_MIN_SEC, CACHE_DEFAULT_SEC, CACHE_MAX_SEC = 300, 3600, 86400
FETCH_TIMEOUT = httpx.Timeout(5.0)
FETCH_HEADERS = {"Accept": "application/json", "Accept-Encoding": "identity"}
FETCH_DEADLINE_SEC = 5  # the whole fetch: the per-read timeout alone lets a server drip 5 KiB for hours
_JSON_TYPE = re.compile(r"application/([a-z0-9.+-]+\+)?json")
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # never in a client_id (and NUL cannot reach PostgreSQL text)
# Schemes a redirect must never use: they run code or read local data in the browser. Private-use schemes of
# native apps (cursor://, vscode://, com.example.app:/) are allowed (RFC 8252 section 7.1).
FORBIDDEN_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "about", "blob", "filesystem", "ftp",
                               "ws", "wss"})
_PRIVATE_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
# What a registration or a client metadata document may hold: 4xx beyond (invalid_client_metadata, or
# invalid_redirect_uri for the redirect URIs).
MAX_REGISTRATION_BYTES = 16 * 1024
MAX_NAME_CHARS = 200
MAX_REDIRECT_URIS = 10
MAX_URI_CHARS = 2000  # a redirect URI, client_uri, logo_uri, ... and any other string value
MAX_LIST_ITEMS = 10  # contacts, grant_types, ... any list


@dataclass(frozen=True)
class RedirectRule:
    """A kind of redirect URI clients may register. `scheme` None: a native app's private-use scheme (not one of
    FORBIDDEN_SCHEMES). `hosts` None: any host (https needs one); else only these. `any_port`: a URI registered
    without a port matches the same URI on any port (RFC 8252 section 7.3, loopback)."""

    scheme: str | None
    hosts: frozenset[str] | None = None
    any_port: bool = False

    def admits(self, scheme: str, host: str) -> bool:
        if self.scheme is None:
            return scheme not in ("https", "http") and scheme not in FORBIDDEN_SCHEMES \
                and _PRIVATE_SCHEME.fullmatch(scheme) is not None
        if scheme != self.scheme:
            return False
        return bool(host) if self.hosts is None else host in self.hosts


# The redirect URI rules, first match wins: https anywhere; http to a loopback host, any port; native-app schemes.
REDIRECT_RULES: tuple[RedirectRule, ...] = (
    RedirectRule("https"),
    RedirectRule("http", LOOPBACK_HOSTS, any_port=True),
    RedirectRule(None),
)


class OAuthError(Exception):
    """An OAuth protocol error: the RFC's `error` code and `error_description` (never a Lev error-table code)."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status


@dataclass(frozen=True)
class Client:
    client_id: str
    kind: str  # 'dcr' or 'cimd'
    name: str
    uri: str | None
    redirect_uris: tuple[str, ...]
    auth_method: str
    secret_hash: bytes | None


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def _rule(uri: str) -> RedirectRule | None:
    """The rule that admits `uri` as a redirect URI (never one with a fragment, user info or whitespace, or longer
    than MAX_URI_CHARS), or None."""
    try:
        parts = weburl.parse(uri, schemes=None, need_host=False, max_chars=MAX_URI_CHARS)
    except weburl.BadUrl:
        return None
    host = (parts.hostname or "").lower()
    scheme = parts.scheme.lower()
    if not scheme or parts.fragment or "@" in parts.netloc or any(c.isspace() for c in uri):
        return None
    return next((rule for rule in REDIRECT_RULES if rule.admits(scheme, host)), None)


def redirect_uri_allowed(uri: str) -> bool:
    """Whether a client may register `uri` (REDIRECT_RULES)."""
    return _rule(uri) is not None


def redirect_matches(registered: tuple[str, ...], given: str) -> bool:
    """Exact string match; for a URI registered without a port under an `any_port` rule, any port."""
    if given in registered:
        return True
    try:
        asked = urlsplit(given)
        for uri in registered:
            rule = _rule(uri)
            reg = urlsplit(uri)
            if (rule is not None and rule.any_port and reg.port is None and asked.port is not None
                    and reg.scheme == asked.scheme and reg.hostname == asked.hostname
                    and reg.path == asked.path and reg.query == asked.query):
                return True
    except ValueError:
        return False
    return False


def check_bounds(document: Any, where: str = "") -> str | None:
    """What makes a registration or metadata document too large, or None: a client_name over MAX_NAME_CHARS, more
    than MAX_REDIRECT_URIS redirect URIs, any other list over MAX_LIST_ITEMS, any string over MAX_URI_CHARS."""
    if isinstance(document, dict):
        for key, value in document.items():
            path = f"{where}.{key}" if where else str(key)
            if len(str(key)) > MAX_NAME_CHARS:
                return f"a field name is longer than {MAX_NAME_CHARS} characters"
            if key == "client_name" and not where and isinstance(value, str) and len(value) > MAX_NAME_CHARS:
                return f"client_name is longer than {MAX_NAME_CHARS} characters"
            if key == "redirect_uris" and not where and isinstance(value, list) and len(value) > MAX_REDIRECT_URIS:
                return f"redirect_uris lists more than {MAX_REDIRECT_URIS} URIs"
            found = check_bounds(value, path)
            if found:
                return found
    elif isinstance(document, list):
        if len(document) > max(MAX_LIST_ITEMS, MAX_REDIRECT_URIS):
            return f"{where or 'a list'} has more than {max(MAX_LIST_ITEMS, MAX_REDIRECT_URIS)} items"
        for n, value in enumerate(document):
            found = check_bounds(value, f"{where}[{n}]")
            if found:
                return found
    elif isinstance(document, str) and len(document) > MAX_URI_CHARS:
        return f"{where or 'a value'} is longer than {MAX_URI_CHARS} characters"
    return None


def is_metadata_url(client_id: str) -> bool:
    """A client ID metadata document URL: https, a path, no fragment, no user info, no dot segments."""
    try:
        parts = weburl.parse(client_id, schemes=("https",), max_chars=2000)
    except weburl.BadUrl:
        return False
    segments = parts.path.split("/")
    return (parts.scheme == "https" and bool(parts.hostname) and parts.path not in ("", "/") and not parts.fragment
            and "@" not in parts.netloc and "." not in segments and ".." not in segments)


def _client(row: dict[str, Any]) -> Client:
    return Client(client_id=row["client_id"], kind=row["kind"],
                  name=row["client_name"] or urlsplit(row["client_id"]).hostname or row["client_id"],
                  uri=row["client_uri"], redirect_uris=tuple(row["redirect_uris"]), auth_method=row["auth_method"],
                  secret_hash=row["secret_hash"])


async def load_client(db: Database, outbound: Outbound, client_id: str | None, *, fresh: bool) -> Client:
    """The registered client, fetching a metadata document when the client_id is one and (with `fresh`) its cached
    copy is missing or stale; 400 invalid_client (`OAuthError`) when there is no such client."""
    if not client_id or len(client_id) > 2000 or _CONTROL.search(client_id):
        raise OAuthError("invalid_client", "client_id is missing or unknown.", 401)
    async with db.transaction() as s:
        row = await oauth_store.get_client(s, client_id)
    cimd = is_metadata_url(client_id)
    if row is not None and (not cimd or not fresh or row["stale_at"] is None or row["stale_at"] > clock.now()):
        return _client(row)
    if not cimd:
        raise OAuthError("invalid_client", f"Unknown client_id {client_id!r}: register the client first.", 401)
    document, max_age = await fetch_metadata_document(outbound, client_id)
    values = validate_metadata_document(client_id, document)
    async with db.transaction() as s:
        await oauth_store.save_client(s, client_id=client_id, kind="cimd", metadata=document, secret_hash=None,
                                      stale_at=clock.now() + timedelta(seconds=max_age), **values)
        row = await oauth_store.get_client(s, client_id)
    assert row is not None
    return _client(row)


def _max_age(cache_control: str) -> int:
    if re.search(r"\b(no-store|no-cache)\b", cache_control):
        return CACHE_MIN_SEC
    found = re.search(r"\bmax-age=(\d+)", cache_control)
    seconds = int(found.group(1)) if found else CACHE_DEFAULT_SEC
    return max(CACHE_MIN_SEC, min(CACHE_MAX_SEC, seconds))


async def fetch_metadata_document(outbound: Outbound, url: str) -> tuple[dict[str, Any], int]:
    """GET a client ID metadata document through the SSRF guard: 200 only (no redirects), a JSON content type, not
    compressed, at most 5 KiB, within 5 s in all. Returns the document and how long to cache it, in seconds."""
    def refuse(why: str) -> OAuthError:
        return OAuthError("invalid_client", f"Could not use the client metadata document at {url}: {why}.", 401)

    try:
        async with asyncio.timeout(FETCH_DEADLINE_SEC), \
                guarded_client(outbound, FETCH_TIMEOUT, FETCH_HEADERS) as client, client.stream("GET", url) as resp:
            if resp.status_code != 200:
                raise refuse(f"HTTP {resp.status_code}")
            ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
            if not _JSON_TYPE.fullmatch(ctype):  # the draft: any other content type is an error
                raise refuse(f"its content type is {ctype or 'missing'}, not application/json")
            if resp.headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
                raise refuse("it was sent compressed although Lev asked for identity")  # no decompression bombs
            body = b""
            async for part in resp.aiter_raw():
                body += part
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise refuse(f"larger than {MAX_DOCUMENT_BYTES} bytes")
            cache_control = resp.headers.get("cache-control", "")
    except TimeoutError:  # a server dripping its answer under the per-read timeout
        raise refuse(f"it took longer than {FETCH_DEADLINE_SEC} s") from None
    except ApiError as err:  # the SSRF guard's refusal or an unreachable host
        raise refuse(err.message or err.code) from None
    except httpx.HTTPError as exc:
        raise refuse(str(exc) or type(exc).__name__) from None
    except (httpx.InvalidURL, ValueError) as exc:  # a URL httpx cannot send, a host IDNA refuses
        raise refuse(f"invalid URL ({exc})") from None
    try:
        document = jsonguard.loads(body)
    except jsonguard.BadJson as exc:
        raise refuse(f"not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise refuse("not a JSON object")
    return document, _max_age(cache_control.lower())


def validate_metadata_document(url: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The client row's values from a fetched document, or invalid_client saying what is wrong with it."""
    def refuse(why: str) -> OAuthError:
        return OAuthError("invalid_client", f"The client metadata document at {url} is not valid: {why}.", 401)

    if doc.get("client_id") != url:
        raise refuse("its client_id is not exactly the URL it was fetched from")
    too_large = check_bounds(doc)
    if too_large:
        raise refuse(too_large)
    if "client_secret" in doc or "client_secret_expires_at" in doc:
        raise refuse("it contains a client secret")
    method = doc.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise refuse(f"token_endpoint_auth_method must be none, not {method!r}")
    uris = doc.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) and redirect_uri_allowed(u) for u in uris):
        raise refuse("redirect_uris must list https, loopback http or native-app URIs")
    grants, responses = doc.get("grant_types", ["authorization_code"]), doc.get("response_types", ["code"])
    if not isinstance(grants, list) or "authorization_code" not in grants:
        raise refuse("grant_types must be a list including authorization_code")
    if not isinstance(responses, list) or "code" not in responses:
        raise refuse("response_types must be a list including code")
    name, uri = doc.get("client_name"), doc.get("client_uri")
    return {"client_name": name.strip() if isinstance(name, str) and name.strip() else None,
            "client_uri": uri if weburl.is_http_url(uri) and str(uri).startswith("https://") else None,
            "redirect_uris": list(uris), "auth_method": "none"}


async def register(db: Database, body: bytes) -> dict[str, Any]:
    """RFC 7591 dynamic registration: the client information response (201), or invalid_redirect_uri /
    invalid_client_metadata. A secret is issued for the secret methods (shown once; only its hash is kept)."""
    if len(body) > MAX_REGISTRATION_BYTES:
        raise OAuthError("invalid_client_metadata", f"The registration request is larger than "
                                                    f"{MAX_REGISTRATION_BYTES} bytes.")
    # The MCP SDK's model of client metadata; imported here, since importing the SDK costs a server about 35 MiB
    # and a second at start-up, for a request that comes once per client installation.
    from mcp.shared.auth import OAuthClientMetadata

    try:
        raw = jsonguard.loads(body)
        if not isinstance(raw, dict):
            raise OAuthError("invalid_client_metadata", "The registration request must be a JSON object.")
        too_large = check_bounds(raw)
        if too_large:
            code = "invalid_redirect_uri" if too_large.startswith("redirect_uris") else "invalid_client_metadata"
            raise OAuthError(code, f"The registration request is too large: {too_large}.")
        meta = OAuthClientMetadata.model_validate(raw)
    except jsonguard.BadJson as exc:
        raise OAuthError("invalid_client_metadata", f"The registration request is not JSON: {exc}.") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        code = "invalid_redirect_uri" if where.startswith("redirect_uris") else "invalid_client_metadata"
        raise OAuthError(code, f"{where or 'body'}: {first['msg']}") from None
    if not isinstance(raw.get("redirect_uris"), list):  # the SDK's model lets null through
        raise OAuthError("invalid_redirect_uri", "redirect_uris must list at least one redirect URI.")
    uris = [str(u) for u in raw["redirect_uris"]]  # as sent: they are compared as strings at authorization
    bad = [u for u in uris if not redirect_uri_allowed(u)]
    if bad:
        raise OAuthError("invalid_redirect_uri", f"Redirect URIs must be https, http on a loopback host, or a "
                                                 f"native app's own scheme, without a fragment: {bad[0]!r}.")
    method = raw.get("token_endpoint_auth_method") or "client_secret_basic"  # RFC 7591 section 2's default
    if method not in AUTH_METHODS:
        raise OAuthError("invalid_client_metadata",
                         f"token_endpoint_auth_method must be one of {', '.join(AUTH_METHODS)}.")
    grants = set(meta.grant_types)
    if "authorization_code" not in grants or not grants <= {"authorization_code", "refresh_token"}:
        raise OAuthError("invalid_client_metadata", "grant_types may be authorization_code and refresh_token.")
    if meta.response_types != ["code"]:
        raise OAuthError("invalid_client_metadata", "response_types must be [\"code\"].")
    scope = " ".join(s for s in (meta.scope or " ".join(SCOPES)).split() if s in SCOPES) or " ".join(SCOPES)
    name = (meta.client_name or "").strip() or None
    client_id = str(uuid.uuid4())
    secret = secrets.token_urlsafe(32) if method in SECRET_METHODS else None
    echo = {k: v for k, v in meta.model_dump(mode="json", exclude_none=True).items()
            if k not in ("client_secret", "client_id")}
    echo.update(redirect_uris=uris, token_endpoint_auth_method=method, grant_types=sorted(grants),
                response_types=["code"], scope=scope)
    async with db.transaction() as s:
        await oauth_store.save_client(s, client_id=client_id, kind="dcr", client_name=name,
                                      client_uri=str(meta.client_uri) if meta.client_uri else None,
                                      redirect_uris=uris, auth_method=method,
                                      secret_hash=_digest(secret) if secret else None, metadata=echo, stale_at=None)
    out = {**echo, "client_id": client_id, "client_id_issued_at": int(time.time())}
    if secret is not None:
        out.update(client_secret=secret, client_secret_expires_at=0)
    return out


def _basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    if not authorization or not authorization.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise OAuthError("invalid_client", "The Basic credentials are malformed.", 401) from None
    user, sep, password = decoded.partition(":")
    if not sep:
        raise OAuthError("invalid_client", "The Basic credentials are malformed.", 401)
    return unquote(user), unquote(password)


async def authenticate_client(db: Database, outbound: Outbound, form: dict[str, str],
                              authorization: str | None) -> Client:
    """The client a token or revocation request comes from: a public client names itself with client_id; a
    confidential one proves its secret (HTTP Basic or client_secret in the body). 401 invalid_client otherwise."""
    basic = _basic_credentials(authorization)
    client_id = form.get("client_id")
    secret = form.get("client_secret")
    if basic is not None:
        if client_id and client_id != basic[0]:
            raise OAuthError("invalid_client", "client_id differs from the Basic credentials.", 401)
        client_id, secret = basic
    client = await load_client(db, outbound, client_id, fresh=False)
    if client.secret_hash is not None:
        if not secret or not hmac.compare_digest(_digest(secret), client.secret_hash):
            raise OAuthError("invalid_client", "The client secret is missing or wrong.", 401)
    return client
