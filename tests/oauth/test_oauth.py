"""One-click connect: Lev as the OAuth 2.1 authorization server of /api/mcp, driven by the official SDK's
`OAuthClientProvider` (pinned mcp 2.3.0) against the live server, with the sign-in and the consent form done over
HTTP with the session cookie; the client's metadata document is served over real TLS on loopback."""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import json
import secrets
import time
import uuid
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from mcp.shared.exceptions import MCPError

from lev.oauth.clients import (
    OAuthError,
    fetch_metadata_document,
    is_metadata_url,
    redirect_matches,
    redirect_uri_allowed,
)
from lev.plumbing.ports import Outbound
from tests.cimd_site import ClientSite, LoopbackCA

PASSWORD = "a long enough password"
CALLBACK = "http://127.0.0.1:9/callback"  # nothing listens: the test reads the redirect's Location itself
ACCEPT = "application/json, text/event-stream"


@pytest.fixture(scope="module")
def site(loopback_ca: LoopbackCA) -> Iterator[ClientSite]:
    s = ClientSite(loopback_ca)
    yield s
    s.close()


class _Hidden(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self.buttons: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "input" and a.get("type") == "hidden" and a.get("name"):
            self.fields[str(a["name"])] = a.get("value") or ""
        if tag == "button" and a.get("name") == "decision":
            self.buttons.append(str(a.get("value")))


class Person:
    """A signed-in browser, as plain HTTP with the session cookie (the consent page needs no JavaScript)."""

    def __init__(self, base: str, admin: Any, tier: str = "pro") -> None:
        self.email = f"o{uuid.uuid4().hex[:10]}@example.com"
        self.web = httpx.Client(base_url=base, timeout=60)
        r = self.web.post("/api/account/signup", json={"email": self.email, "password": PASSWORD})
        assert r.status_code == 201, r.text
        self.csrf = r.json()["csrf_token"]
        admin.sql("UPDATE users SET tier = :t WHERE email = :e", t=tier, e=self.email)

    def form(self, url: str) -> _Hidden:
        r = self.web.get(url)
        assert r.status_code == 200, r.text
        assert r.headers["x-frame-options"] == "DENY"
        page = _Hidden()
        page.feed(r.text)
        return page

    def consent(self, url: str, *, decision: str = "allow", write: bool = False, **choice: Any) -> httpx.Response:
        data: dict[str, Any] = {**self.form(url).fields, "decision": decision, "access": "all", "kb_only": "on",
                                "expires_in_days": "30", **choice}
        if write:
            data["write"] = "on"
        return self.web.post("/oauth/authorize", data=data)

    def approve(self, url: str, **choice: Any) -> dict[str, str]:
        r = self.consent(url, **choice)
        assert r.status_code == 302, r.text
        return {k: v[0] for k, v in parse_qs(urlsplit(r.headers["location"]).query).items()}

    def grants(self) -> list[dict[str, Any]]:
        return [t for t in self.web.get("/api/account/tokens").json()["tokens"] if t["kind"] == "oauth"]


class Memory:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, info: Any) -> None:
        self.client = info


def provider(base: str, person: Person, *, write: bool | list[bool], metadata_url: str | None = None,
             auth_method: str | None = None) -> tuple[OAuthClientProvider, Memory]:
    answer: dict[str, str] = {}
    choices = list(write) if isinstance(write, list) else None

    async def redirect_handler(url: str) -> None:  # the "browser": sign-in is the cookie, then consent
        answer.clear()
        answer.update(person.approve(url, write=choices.pop(0) if choices is not None else write))

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    store = Memory()
    meta = OAuthClientMetadata(redirect_uris=[CALLBACK], client_name="DCR test client",  # type: ignore[list-item]
                               token_endpoint_auth_method=auth_method)  # type: ignore[arg-type]
    return OAuthClientProvider(f"{base}/api/mcp", meta, store, redirect_handler, callback_handler,
                               client_metadata_url=metadata_url), store


async def _session_calls(base: str, auth: OAuthClientProvider, calls: list[tuple[str, dict[str, Any]]]
                         ) -> list[Any]:
    out: list[Any] = []
    async with httpx2.AsyncClient(auth=auth, timeout=60) as http, \
            streamable_http_client(f"{base}/api/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        out.append([t.name for t in (await session.list_tools()).tools])
        for name, args in calls:
            try:
                out.append((await session.call_tool(name, args)).structured_content)
            except MCPError as exc:
                out.append((exc.error.code, exc.error.data))
    return out


def mcp_call(base: str, token: str, tool: str, args: dict[str, Any], headers: dict[str, str] | None = None
             ) -> httpx.Response:
    return httpx.post(f"{base}/api/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                               "params": {"name": tool, "arguments": args}},
                      headers={"Authorization": f"Bearer {token}", "Accept": ACCEPT, **(headers or {})}, timeout=60)


def test_discovery_metadata_and_the_401_challenge(server) -> None:  # type: ignore[no-untyped-def]
    base = server.url
    r = httpx.post(f"{base}/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401 and r.json()["error"]["data"]["error"] == "missing_bearer_token"
    challenge = r.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "error=" not in challenge
    assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/api/mcp"' in challenge
    assert 'scope="lev:read lev:write"' in challenge
    bad = httpx.post(f"{base}/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                     headers={"Authorization": "Bearer lev_" + "x" * 43})
    assert bad.status_code == 401 and 'error="invalid_token"' in bad.headers["www-authenticate"]
    assert "resource_metadata=" in bad.headers["www-authenticate"]
    for path in ("/.well-known/oauth-protected-resource/api/mcp", "/.well-known/oauth-protected-resource"):
        prm = httpx.get(base + path).json()
        assert prm["resource"] == f"{base}/api/mcp" and prm["authorization_servers"] == [base]
        assert prm["scopes_supported"] == ["lev:read", "lev:write"]
    meta = httpx.get(f"{base}/.well-known/oauth-authorization-server").json()
    assert meta["issuer"] == base and meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["client_id_metadata_document_supported"] is True
    assert meta["authorization_response_iss_parameter_supported"] is True
    assert {meta[k] for k in ("authorization_endpoint", "token_endpoint", "registration_endpoint",
                              "revocation_endpoint")} == {f"{base}/oauth/{p}" for p in
                                                          ("authorize", "token", "register", "revoke")}
    assert httpx.options(f"{base}/oauth/token").headers["access-control-allow-origin"] == "*"
    assert httpx.get(f"{base}/oauth/token").status_code == 405


def test_sdk_connects_by_client_metadata_document_refreshes_and_revokes(server, admin, site) -> None:  # type: ignore[no-untyped-def]
    base, person = server.url, Person(server.url, admin)
    client_id = site.document(f"/clients/{uuid.uuid4().hex[:8]}.json", [CALLBACK], name="SDK test client")
    auth, store = provider(base, person, write=True, metadata_url=client_id)
    out = asyncio.run(_session_calls(base, auth, [
        ("add_to_knowledge", {"text": "Axolotls can regrow limbs and parts of their brain.", "title": "Axolotl"}),
        ("search_knowledge_base", {"query": "axolotl regrow"}), ("list_recent", {"limit": 5})]))
    assert out[0] == ["search_knowledge_base", "get_item", "list_recent", "add_to_knowledge"]
    added = out[1]
    assert added["status"] == "ready" and out[2]["results"][0]["item_id"] == added["item_id"]
    assert out[3]["items"][0]["id"] == added["item_id"]
    assert store.client.client_id == client_id and store.tokens.scope == "lev:read lev:write"
    assert urlsplit(client_id).path in site.hits
    [grant] = person.grants()
    assert grant["name"] == "SDK test client" and grant["client_id"] == client_id
    assert grant["capabilities"] == ["read", "write"] and grant["is_unscoped"] and grant["kb_only"]
    # get_item through the SDK after the access token ran out: the provider refreshes (rotation) on its own
    first = store.tokens
    auth.context.token_expiry_time = time.time() - 1
    out = asyncio.run(_session_calls(base, auth, [("get_item", {"item_id": added["item_id"]})]))
    assert out[1]["title"] == "Axolotl"
    assert store.tokens.access_token != first.access_token and store.tokens.refresh_token != first.refresh_token
    old = mcp_call(base, first.access_token, "list_recent", {})
    assert old.status_code == 401 and old.json()["error"]["data"]["error"] == "invalid_token"
    assert mcp_call(base, store.tokens.access_token, "list_recent", {}).status_code == 200
    # the grant is a token of the user: on REST (another resource) its access token is refused
    rest = httpx.get(f"{base}/api/v1/folders", headers={"Authorization": f"Bearer {store.tokens.access_token}"})
    assert rest.status_code == 401 and rest.json()["error"] == "invalid_token" and "/api/mcp" in rest.json()["message"]
    # the activity log names the grant
    logged: set[str] = set()
    for _ in range(50):  # the activity log is written in batches every 0.5 s
        entries = person.web.get("/api/account/activity", params={"token_id": grant["id"]}).json()["entries"]
        logged = {e["method"] for e in entries}
        if {"tools/call add_to_knowledge", "tools/call get_item"} <= logged:
            break
        time.sleep(0.2)
    assert {"tools/call add_to_knowledge", "tools/call get_item"} <= logged
    # RFC 7009: the client revokes with its refresh token; the whole grant goes
    r = httpx.post(f"{base}/oauth/revoke", data={"token": store.tokens.refresh_token, "client_id": client_id})
    assert r.status_code == 200
    gone = mcp_call(base, store.tokens.access_token, "list_recent", {})
    assert gone.status_code == 401 and 'error="invalid_token"' in gone.headers["www-authenticate"]
    assert person.grants()[0]["revoked_at"] is not None


def test_sdk_registers_dynamically_and_a_read_only_grant_is_refused_writes(server, admin, user) -> None:  # type: ignore[no-untyped-def]
    base, person = server.url, Person(server.url, admin)
    auth, store = provider(base, person, write=False)  # DCR with RFC 7591's default: client_secret_basic
    out = asyncio.run(_session_calls(base, auth, [("add_to_knowledge", {"text": "nope"}),
                                                  ("list_recent", {"limit": 1})]))
    assert store.client.client_secret and store.client.token_endpoint_auth_method == "client_secret_basic"
    assert store.tokens.scope == "lev:read"
    code, data = out[1]
    assert code == -32605 and data["error"] == "capability_denied" and data["required"] == "write"
    assert out[2] == {"items": []}
    [grant] = person.grants()
    assert grant["name"] == "DCR test client" and grant["capabilities"] == ["read"]
    secret_hash = admin.sql("SELECT secret_hash FROM oauth_clients WHERE client_id = :c", c=store.client.client_id)
    assert secret_hash[0][0] == hashlib.sha256(store.client.client_secret.encode()).digest()  # only the hash
    # where the transport names the tool (Mcp-Method / Mcp-Name, revision 2026-07-28): 403 insufficient_scope
    named = {"Mcp-Method": "tools/call", "Mcp-Name": "add_to_knowledge"}
    r = mcp_call(base, store.tokens.access_token, "add_to_knowledge", {"text": "x"}, named)
    assert r.status_code == 403 and r.json()["id"] == 7 and r.json()["error"]["code"] == -32605
    assert r.json()["error"]["data"]["error"] == "capability_denied"
    challenge = r.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="lev:read lev:write"' in challenge
    assert "resource_metadata=" in challenge
    pasted = mcp_call(base, user.token(), "add_to_knowledge", {"text": "x"}, named)  # a lev_ token: as before
    assert pasted.status_code == 200 and pasted.json()["error"]["code"] == -32605
    # revoked in Settings -> Integrations (the account API behind its Revoke button): the client gets 401
    r = person.web.delete(f"/api/account/tokens/{grant['id']}", headers={"X-CSRF-Token": person.csrf})
    assert r.status_code == 200
    assert mcp_call(base, store.tokens.access_token, "list_recent", {}).status_code == 401


def test_sdk_on_2026_07_28_steps_up_a_read_only_grant(server, admin) -> None:  # type: ignore[no-untyped-def]
    """The SDK's high-level client speaks 2026-07-28, which names the tool in Mcp-Name: a read-only grant's
    add_to_knowledge is a 403 insufficient_scope at the transport; the client asks the user again (step-up), who
    now allows write, and the call goes through."""
    base, person = server.url, Person(server.url, admin)
    auth, store = provider(base, person, write=[False, True], auth_method="none")

    async def go() -> tuple[str, Any, Any]:
        async with httpx2.AsyncClient(auth=auth, timeout=60) as http, \
                Client(streamable_http_client(f"{base}/api/mcp", http_client=http), mode="auto") as c:
            recent = (await c.list_tools(), (await c.call_tool("list_recent", {"limit": 1})).structured_content)
            added = await c.call_tool("add_to_knowledge", {"text": "Step-up works.", "title": "Step-up"})
            return c.protocol_version, recent[1], added.structured_content

    version, recent, added = asyncio.run(asyncio.wait_for(go(), 120))
    assert version == "2026-07-28" and recent == {"items": []} and added["status"] == "ready"
    assert store.tokens.scope == "lev:read lev:write"
    grants = sorted(person.grants(), key=lambda g: g["created_at"])
    assert [g["capabilities"] for g in grants] == [["read"], ["read", "write"]]  # the first stays until revoked


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def _count(admin: Any, email: str) -> tuple[int, int, int]:
    row = admin.sql(
        "SELECT (SELECT count(*) FROM tokens t JOIN users u ON u.id = t.user_id WHERE u.email = :e), "
        "(SELECT count(*) FROM tokens t JOIN users u ON u.id = t.user_id WHERE u.email = :e AND t.revoked_at IS NULL),"
        " (SELECT count(*) FROM oauth_refresh_tokens r JOIN tokens t ON t.id = r.token_id JOIN users u "
        "ON u.id = t.user_id WHERE u.email = :e)", e=email)[0]
    return int(row[0]), int(row[1]), int(row[2])


def test_every_oauth_error_answers_the_rfc_code_and_creates_nothing(server, admin) -> None:  # type: ignore[no-untyped-def]
    base, person = server.url, Person(server.url, admin)
    resource = f"{base}/api/mcp"
    reg = httpx.post(f"{base}/oauth/register", json={"redirect_uris": [CALLBACK], "client_name": "Raw client",
                                                     "token_endpoint_auth_method": "none"})
    assert reg.status_code == 201 and "client_secret" not in reg.json()
    cid = reg.json()["client_id"]
    for bad, code in (({"redirect_uris": ["http://evil.example/cb"]}, "invalid_redirect_uri"),
                      ({"redirect_uris": [CALLBACK], "grant_types": ["client_credentials"]},
                       "invalid_client_metadata"), ({"client_name": "no redirect"}, "invalid_redirect_uri")):
        r = httpx.post(f"{base}/oauth/register", json=bad)
        assert r.status_code == 400 and r.json()["error"] == code, r.text

    def authorize_url(**over: str) -> tuple[str, str]:
        verifier, challenge = _pkce()
        q = {"response_type": "code", "client_id": cid, "redirect_uri": CALLBACK, "state": "s1",
             "code_challenge": challenge, "code_challenge_method": "S256", "scope": "lev:read lev:write",
             "resource": resource, **over}
        return f"{base}/oauth/authorize?{urlencode(q)}", verifier

    def token(**form: str) -> httpx.Response:
        return httpx.post(f"{base}/oauth/token", data={"client_id": cid, "redirect_uri": CALLBACK,
                                                       "grant_type": "authorization_code", **form})

    # authorization errors the client must not be redirected for: unknown client, unregistered redirect URI
    for over in ({"client_id": "no-such-client"}, {"redirect_uri": "http://127.0.0.1:9/elsewhere"}):
        r = person.web.get(authorize_url(**over)[0])
        assert r.status_code == 400 and "location" not in r.headers and "invalid_request" in r.text
    # nor for any other invalid request: the redirect URI is unvetted, so the error is shown on Lev's page (issue 32)
    for over, code in (({"resource": f"{base}/api/v2"}, "invalid_target"), ({"resource": ""}, "invalid_request"),
                       ({"code_challenge_method": "plain"}, "invalid_request"),
                       ({"response_type": "token"}, "unsupported_response_type")):
        r = person.web.get(authorize_url(**over)[0])
        assert r.status_code == 400 and "location" not in r.headers and code in r.text, r.text
    url, _ = authorize_url()
    denied = parse_qs(urlsplit(person.consent(url, decision="deny").headers["location"]).query)
    assert denied["error"] == ["access_denied"] and denied["iss"] == [base]
    before = _count(admin, person.email)

    url, verifier = authorize_url()
    code = person.approve(url, write=True)["code"]
    for form, status, error in (({"code": code, "code_verifier": "w" * 43}, 400, "invalid_grant"),
                                ({"code": code, "code_verifier": verifier, "redirect_uri": CALLBACK + "x"}, 400,
                                 "invalid_grant"),
                                ({"code": code, "code_verifier": verifier, "resource": f"{base}/api/v1"}, 400,
                                 "invalid_target"),
                                ({"code": code, "code_verifier": verifier, "client_id": "no-such-client"}, 401,
                                 "invalid_client"),
                                ({"code": "nope", "code_verifier": verifier}, 400, "invalid_grant"),
                                ({"code": code, "code_verifier": verifier, "grant_type": "password"}, 400,
                                 "unsupported_grant_type")):
        r = token(**form)
        assert r.status_code == status and r.json()["error"] == error, (form, r.text)
        assert r.headers["cache-control"] == "no-store"
    assert _count(admin, person.email) == before  # nothing created
    good = token(code=code, code_verifier=verifier, resource=resource)
    assert good.status_code == 200, good.text
    issued = good.json()
    assert issued["token_type"] == "Bearer" and issued["scope"] == "lev:read lev:write"
    assert 3500 < issued["expires_in"] <= 3600 and issued["access_token"].startswith("lev_")
    assert mcp_call(base, issued["access_token"], "list_recent", {}).status_code == 200
    reused = token(code=code, code_verifier=verifier)  # RFC 6749 4.1.2: refused, and its grant revoked
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    assert mcp_call(base, issued["access_token"], "list_recent", {}).status_code == 401

    url, verifier = authorize_url()
    code = person.approve(url)["code"]
    admin.sql("UPDATE oauth_codes SET expires_at = now() - interval '1 second' WHERE used_at IS NULL AND user_id = "
              "(SELECT id FROM users WHERE email = :e)", e=person.email)
    counted = _count(admin, person.email)
    expired = token(code=code, code_verifier=verifier)
    assert expired.status_code == 400 and expired.json()["error"] == "invalid_grant"
    assert _count(admin, person.email) == counted

    url, verifier = authorize_url()
    first = token(code=person.approve(url)["code"], code_verifier=verifier).json()

    def refresh(rt: str, **form: str) -> httpx.Response:
        return httpx.post(f"{base}/oauth/token", data={"grant_type": "refresh_token", "refresh_token": rt,
                                                       "client_id": cid, **form})

    for form, error in (({"resource": f"{base}/api/v1"}, "invalid_target"), ({"scope": "lev:write"}, "invalid_scope"),
                        ({"client_id": "no-such-client"}, "invalid_client")):
        assert refresh(first["refresh_token"], **form).json()["error"] == error
    second = refresh(first["refresh_token"], resource=resource).json()
    assert second["refresh_token"] != first["refresh_token"] and second["scope"] == "lev:read"
    assert mcp_call(base, first["access_token"], "list_recent", {}).status_code == 401  # rotated away
    assert mcp_call(base, second["access_token"], "list_recent", {}).status_code == 200
    counted = _count(admin, person.email)
    reuse = refresh(first["refresh_token"])  # a rotated refresh token again: refused, the grant revoked
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    assert _count(admin, person.email)[0::2] == counted[0::2] and _count(admin, person.email)[1] == counted[1] - 1
    assert mcp_call(base, second["access_token"], "list_recent", {}).status_code == 401
    assert refresh(second["refresh_token"]).json()["error"] == "invalid_grant"

    url, verifier = authorize_url()  # a password change revokes grants like every token
    third = token(code=person.approve(url)["code"], code_verifier=verifier).json()
    r = person.web.post("/api/account/password", json={"current_password": PASSWORD, "new_password": PASSWORD + "!"},
                        headers={"X-CSRF-Token": person.csrf})
    assert r.status_code == 200 and r.json()["revoked_tokens"] == 1
    assert mcp_call(base, third["access_token"], "list_recent", {}).status_code == 401
    assert refresh(third["refresh_token"]).json()["error"] == "invalid_grant"


def test_free_tier_sees_the_402_figures_and_cannot_approve(server, admin) -> None:  # type: ignore[no-untyped-def]
    base, person = server.url, Person(server.url, admin, tier="free")
    cid = httpx.post(f"{base}/oauth/register", json={"redirect_uris": [CALLBACK],
                                                     "token_endpoint_auth_method": "none"}).json()["client_id"]
    q = {"response_type": "code", "client_id": cid, "redirect_uri": CALLBACK, "code_challenge": _pkce()[1],
         "code_challenge_method": "S256", "resource": f"{base}/api/mcp"}
    url = f"{base}/oauth/authorize?{urlencode(q)}"
    page = person.web.get(url)
    assert "tier free, cap 0, used 0" in page.text and person.form(url).buttons == ["deny"]
    r = person.consent(url)
    assert r.status_code == 402 and "payment_required" in r.text and "location" not in r.headers
    assert admin.sql("SELECT count(*) FROM oauth_codes c JOIN users u ON u.id = c.user_id WHERE u.email = :e",
                     e=person.email)[0][0] == 0
    signed_out = httpx.get(url)  # no session: to the sign-in page, which comes back here
    assert signed_out.status_code == 303 and signed_out.headers["location"].startswith("/login?next=%2Foauth")


def test_client_metadata_documents_are_checked(server, admin, site) -> None:  # type: ignore[no-untyped-def]
    base, person = server.url, Person(server.url, admin)
    good = site.document("/c/ok.json", [CALLBACK])
    bad = {
        "/c/mismatch.json": {**site.docs["/c/ok.json"], "client_id": site.url + "/c/other.json"},
        "/c/secret.json": {"client_id": site.url + "/c/secret.json", "redirect_uris": [CALLBACK],
                           "client_secret": "s"},
        "/c/evil-redirect.json": {"client_id": site.url + "/c/evil-redirect.json",
                                  "redirect_uris": ["http://evil.example/cb"]},
        "/c/huge.json": {"client_id": site.url + "/c/huge.json", "redirect_uris": [CALLBACK], "pad": "x" * 6000},
        "/c/grant-types.json": {"client_id": site.url + "/c/grant-types.json", "redirect_uris": [CALLBACK],
                                "grant_types": 5},  # not a list: was a TypeError (500)
    }
    site.docs.update(bad)
    served = {f"/c/{name}.json": {"client_id": f"{site.url}/c/{name}.json", "redirect_uris": [CALLBACK]}
              for name in ("html", "gzip", "slow")}
    why = {"/c/html.json": "content type is text/html", "/c/gzip.json": "sent compressed",
           "/c/slow.json": "took longer than 5 s"}
    site.docs["/c/html.json"] = (200, json.dumps(served["/c/html.json"]).encode(), {"Content-Type": "text/html"})
    site.docs["/c/gzip.json"] = (200, gzip.compress(json.dumps(served["/c/gzip.json"]).encode()),
                                 {"Content-Encoding": "gzip"})  # a decompression bomb is this, bigger
    site.docs["/c/slow.json"] = served["/c/slow.json"]
    site.drip["/c/slow.json"] = 0.8  # 10 bytes every 0.8 s: never a 5 s read timeout, some 9 s in all
    for path in [*bad, *why, "/c/missing.json"]:
        q = {"response_type": "code", "client_id": site.url + path, "redirect_uri": CALLBACK,
             "code_challenge": _pkce()[1], "code_challenge_method": "S256", "resource": f"{base}/api/mcp"}
        r = person.web.get(f"{base}/oauth/authorize?{urlencode(q)}")
        assert r.status_code == 400 and "location" not in r.headers and "client metadata document" in r.text, path
        assert why.get(path, "") in r.text, (path, r.text[-600:])  # the slow one: cut at 5 s of its 9
    q = {"response_type": "code", "client_id": good, "redirect_uri": CALLBACK, "code_challenge": _pkce()[1],
         "code_challenge_method": "S256", "resource": f"{base}/api/mcp"}
    assert "Site client" in person.web.get(f"{base}/oauth/authorize?{urlencode(q)}").text


def test_redirect_and_client_id_rules_and_the_ssrf_guard(site) -> None:  # type: ignore[no-untyped-def]
    for uri, ok in (("https://app.example/cb", True), ("http://127.0.0.1:5/cb", True), ("http://localhost/cb", True),
                    ("cursor://anysphere.cursor-mcp/oauth/callback", True), ("http://app.example/cb", False),
                    ("javascript:alert(1)", False), ("https://app.example/cb#x", False),
                    ("https://u:p@app.example/cb", False)):
        assert redirect_uri_allowed(uri) is ok, uri
    assert redirect_matches(("http://127.0.0.1/cb",), "http://127.0.0.1:5123/cb")  # RFC 8252 7.3
    assert not redirect_matches(("http://127.0.0.1:80/cb",), "http://127.0.0.1:5123/cb")
    assert not redirect_matches(("https://app.example/cb",), "https://app.example/cb2")
    for cid, ok in (("https://app.example/client.json", True), ("https://app.example/", False),
                    ("http://app.example/c.json", False), ("https://u:p@app.example/c.json", False),
                    ("https://app.example/a/../c.json", False)):
        assert is_metadata_url(cid) is ok, cid
    # this test process runs with private addresses refused (the production default): the document on loopback is
    # not fetched at all
    with pytest.raises(OAuthError) as err:
        asyncio.run(fetch_metadata_document(Outbound(), site.url + "/c/ok.json"))
    assert err.value.error == "invalid_client" and "private" in err.value.description


def test_hostile_input_is_a_clear_4xx_never_a_500(server, admin) -> None:  # type: ignore[no-untyped-def]
    """NUL in a client_id (form, Basic credentials, query), a metadata-document URL httpx or IDNA cannot use, a
    registration with `redirect_uris: null`, and consent values int() chokes on: RFC errors, not 500s."""
    base, person = server.url, Person(server.url, admin)
    nul_basic = "Basic " + base64.b64encode(b"%00x:y").decode()
    for path in ("/oauth/token", "/oauth/revoke"):
        for data, headers in (({"client_id": "a\x00b"}, {}), ({}, {"Authorization": nul_basic})):
            r = httpx.post(base + path, data={"grant_type": "refresh_token", "refresh_token": "x", "token": "x",
                                              **data}, headers=headers)
            assert r.status_code == 401 and r.json()["error"] == "invalid_client", (path, r.text)
    r = httpx.post(f"{base}/oauth/register", json={"redirect_uris": None})
    assert r.status_code == 400 and r.json()["error"] == "invalid_redirect_uri", r.text
    cid = httpx.post(f"{base}/oauth/register", json={"redirect_uris": [CALLBACK],
                                                     "token_endpoint_auth_method": "none"}).json()["client_id"]
    q = {"response_type": "code", "client_id": cid, "redirect_uri": CALLBACK, "code_challenge": _pkce()[1],
         "code_challenge_method": "S256", "resource": f"{base}/api/mcp"}
    for client_id in ("a\x00b", "https://xn--a.example/c.json", "https://a\x00b.example/c.json"):
        r = person.web.get(f"{base}/oauth/authorize?{urlencode({**q, 'client_id': client_id})}")
        assert r.status_code == 400 and "location" not in r.headers and "invalid_request" in r.text, client_id
    url = f"{base}/oauth/authorize?{urlencode(q)}"
    for days in ("\u00b2", "9" * 5000, "\u0663\u0660"):  # a superscript two, 5000 digits, Arabic-Indic 30
        r = person.consent(url, expires_in_days=days)
        assert r.status_code == 400 and "auto-revoke" in r.text and "location" not in r.headers, days
