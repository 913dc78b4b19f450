"""The browser extension as an OAuth client of Lev's authorization server, over plain HTTP: it registers with its
chrome.identity redirect (https://<extension-id>.chromiumapp.org/), asks for a grant on the REST API (RFC 8707
resource `{base}/api/v1`, announced by RFC 9728 metadata), and the grant works on REST only; an MCP grant stays
refused on REST. The same flow in real Chromium is in test_extension.py."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from tests.oauth.test_oauth import Person
from tests.stack import Admin

EXTENSION_REDIRECT = "https://abcdefghijklmnopabcdefghijklmnop.chromiumapp.org/"


def _authorize(base: str, client_id: str, redirect: str, resource: str) -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return f"{base}/oauth/authorize?" + urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": redirect, "state": "s",
        "scope": "lev:read lev:write", "code_challenge": challenge, "code_challenge_method": "S256",
        "resource": resource}), verifier


def test_the_extension_registers_and_gets_a_grant_for_the_rest_api(server, admin: Admin) -> None:  # type: ignore[no-untyped-def]
    base = server.url
    prm = httpx.get(f"{base}/.well-known/oauth-protected-resource/api/v1").json()
    assert prm["resource"] == f"{base}/api/v1" and prm["authorization_servers"] == [base]
    assert prm["scopes_supported"] == ["lev:read", "lev:write"]
    for redirect in (EXTENSION_REDIRECT, "chrome-extension://abcdefghijklmnopabcdefghijklmnop/oauth.html"):
        r = httpx.post(f"{base}/oauth/register", json={
            "client_name": "Lev browser extension", "redirect_uris": [redirect], "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
            "scope": "lev:read lev:write"})
        assert r.status_code == 201, r.text
        client_id = r.json()["client_id"]
    person = Person(base, admin)
    url, verifier = _authorize(base, client_id, "chrome-extension://abcdefghijklmnopabcdefghijklmnop/oauth.html",
                               f"{base}/api/v1")
    page = person.web.get(url).text
    assert "Connect Lev browser extension to your Lev library?" in page and "Lev&#39;s REST API" in page
    code = person.approve(url, write=True)["code"]
    tokens = httpx.post(f"{base}/oauth/token", data={
        "grant_type": "authorization_code", "code": code, "code_verifier": verifier, "client_id": client_id,
        "redirect_uri": "chrome-extension://abcdefghijklmnopabcdefghijklmnop/oauth.html",
        "resource": f"{base}/api/v1"}).json()
    assert tokens["scope"] == "lev:read lev:write"
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    saved = httpx.post(f"{base}/api/v1/ingest", headers=bearer, timeout=60, json={
        "kind": "page", "url": "https://example.com/grant",
        "html": "<html><body><p>Saved with a grant for the REST API.</p></body></html>"})
    assert saved.status_code == 200, saved.text
    assert httpx.get(f"{base}/api/v1/token", headers=bearer).json()["name"] == "Lev browser extension"
    mcp = httpx.post(f"{base}/api/mcp", headers={**bearer, "Accept": "application/json, text/event-stream"},
                     json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert mcp.status_code == 401 and "/api/v1" in mcp.json()["error"]["data"]["message"]
    [grant] = person.grants()
    assert grant["name"] == "Lev browser extension" and grant["capabilities"] == ["read", "write"]
    # refresh stays on the REST resource; asking for MCP instead is invalid_target
    wrong = httpx.post(f"{base}/oauth/token", data={"grant_type": "refresh_token", "client_id": client_id,
                                                    "refresh_token": tokens["refresh_token"],
                                                    "resource": f"{base}/api/mcp"})
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_target"
    # a resource that is neither MCP nor REST is refused back to the client
    bad, _ = _authorize(base, client_id, "chrome-extension://abcdefghijklmnopabcdefghijklmnop/oauth.html",
                        f"{base}/api/v2")
    r = person.web.get(bad)
    assert r.status_code == 302 and parse_qs(urlsplit(r.headers["location"]).query)["error"] == ["invalid_target"]
