"""The browser extension as an OAuth client of Lev's authorization server, over plain HTTP: it registers with its
chrome.identity redirect (https://<extension-id>.chromiumapp.org/), asks for a grant on the REST API (RFC 8707
resource `{base}/api/v1`, announced by RFC 9728 metadata), and the grant works on REST only; an MCP grant stays
refused on REST. The same flow in real Chromium is in test_extension.py."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import urlencode

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
    # a resource that is neither MCP nor REST is refused on Lev's own page, never sent to the redirect URI
    bad, _ = _authorize(base, client_id, "chrome-extension://abcdefghijklmnopabcdefghijklmnop/oauth.html",
                        f"{base}/api/v2")
    r = person.web.get(bad)
    assert r.status_code == 400 and "location" not in r.headers and "invalid_target" in r.text


def _consent_page(base: str, admin: Admin, name: str, redirect: str) -> str:
    r = httpx.post(f"{base}/oauth/register", json={"client_name": name, "redirect_uris": [redirect],
                                                   "token_endpoint_auth_method": "none"})
    assert r.status_code == 201, r.text
    url, _ = _authorize(base, r.json()["client_id"], redirect, f"{base}/api/v1")
    return Person(base, admin).web.get(url).text


def test_a_client_named_after_the_extension_without_being_it_is_labelled_unverified(server, admin: Admin) -> None:  # type: ignore[no-untyped-def]
    """Issue 38 item 5: anyone could register "Lev browser extension" with a chromiumapp.org.evil.test redirect, and
    its consent page differed from the real one only in the redirect's text. Now the host the answer goes to is
    the page's most prominent fact, and the impostor is labelled unverified."""
    fake = _consent_page(server.url, admin, "Lev browser extension", "https://chromiumapp.org.evil.test/cb")
    assert '<strong class="redirect-host" data-redirect-host>chromiumapp.org.evil.test</strong>' in fake
    assert "data-unverified" in fake and "unverified</span>" in fake
    assert "sends you back to <strong>chromiumapp.org.evil.test</strong>" in fake
    for name in ("LEV Extension", "lev\u200b browser extension", "Ｌｅｖ for Firefox"):  # folded like the real name
        assert "data-unverified" in _consent_page(server.url, admin, name, "https://evil.test/cb"), name

    real = _consent_page(server.url, admin, "Lev browser extension", EXTENSION_REDIRECT)
    host = EXTENSION_REDIRECT.removeprefix("https://").rstrip("/")
    assert f'<strong class="redirect-host" data-redirect-host>{host}</strong>' in real
    assert "data-unverified" not in real and "unverified</span>" not in real
    other = _consent_page(server.url, admin, "Claude", "https://claude.example/cb")  # not named after Lev's: as before
    assert "data-unverified" not in other and "claude.example</strong>" in other
