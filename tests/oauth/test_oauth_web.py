"""The consent page in real Chromium: signed out, an app's authorization request goes through the sign-in page and
back; a free plan sees the 402 figures and no "Allow"; on a paid plan the form works with JavaScript switched
off; the grant then shows in Settings -> Integrations, where revoking it locks the app out."""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from lev.library.reads import create_folder
from tests.stack import Admin
from tests.web.test_web import PASSWORD, browser, page, pytestmark, shot, sign_up  # noqa: F401 (fixtures)

CALLBACK = "http://127.0.0.1:9/callback"


def test_consent_page_without_javascript_and_revoking_in_integrations(browser: Any, page: Any, server,  # type: ignore[no-untyped-def]  # noqa: F811
                                                                        admin: Admin) -> None:
    base = server.url
    cid = httpx.post(f"{base}/oauth/register", json={"redirect_uris": [CALLBACK], "client_name": "Browser test app",
                                                     "token_endpoint_auth_method": "none"}).json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    authorize = f"{base}/oauth/authorize?" + urlencode({
        "response_type": "code", "client_id": cid, "redirect_uri": CALLBACK, "state": "xyz",
        "scope": "lev:read lev:write", "code_challenge": challenge, "code_challenge_method": "S256",
        "resource": f"{base}/api/mcp"})

    email = sign_up(page)  # a free account
    uid = admin.sql("SELECT id FROM users WHERE email = :e", e=email)[0][0]
    folder = admin.run(lambda s: create_folder(s, uid, "Papers"))["id"]
    admin.run(lambda s: create_folder(s, uid, "Recipes"))
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/login")

    page.goto(authorize)  # signed out: the sign-in page, then back to the request
    page.wait_for_url("**/login?next=*")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/oauth/authorize?**")
    assert "tier free, cap 0, used 0" in page.get_by_role("alert").inner_text()
    assert page.get_by_role("button", name="Allow").count() == 0

    admin.sql("UPDATE users SET tier = 'pro' WHERE id = :u", u=uid)
    plain = browser.new_context(base_url=base, java_script_enabled=False)  # the form needs no JavaScript
    try:
        plain.add_cookies(page.context.cookies())
        consent = plain.new_page()
        seen: list[str] = []
        consent.route(f"{CALLBACK}**", lambda route: (seen.append(route.request.url),
                                                      route.fulfill(status=200, body="back in the app")))
        consent.goto(authorize)
        assert consent.get_by_role("heading").first.inner_text() == "Connect Browser test app to your Lev library?"
        shot(consent, "consent")
        consent.get_by_role("radio", name="Specific folders").check()
        consent.locator("#c-folders").select_option(label="Papers")
        consent.get_by_label("write: add pages and notes").check()
        consent.get_by_label("Auto-revoke after").select_option(label="90 days")
        consent.get_by_role("button", name="Allow").click()
        consent.get_by_text("back in the app").wait_for()
    finally:
        plain.close()
    answer = {k: v[0] for k, v in parse_qs(urlsplit(seen[0]).query).items()}
    assert answer["state"] == "xyz" and answer["iss"] == base
    tokens = httpx.post(f"{base}/oauth/token", data={
        "grant_type": "authorization_code", "code": answer["code"], "code_verifier": verifier, "client_id": cid,
        "redirect_uri": CALLBACK, "resource": f"{base}/api/mcp"}).json()
    assert tokens["scope"] == "lev:read lev:write"

    def mcp(tool: str, args: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{base}/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                   "params": {"name": tool, "arguments": args}},
                          headers={"Authorization": f"Bearer {tokens['access_token']}",
                                   "Accept": "application/json, text/event-stream"}, timeout=60)

    added = mcp("add_to_knowledge", {"text": "Notes on the consent page.", "title": "Consent"}).json()
    assert added["result"]["structuredContent"]["folder_id"] == folder  # a one-folder grant files into its folder

    page.goto("/settings/integrations")
    row = page.locator("tr", has_text="Browser test app")
    assert "Papers" in row.inner_text() and "read, write" in row.inner_text()
    shot(page, "integrations-connected-app")
    row.get_by_role("button", name="Revoke Browser test app").click()
    page.locator("tr", has_text="Browser test app").get_by_text("revoked").wait_for()
    refused = mcp("list_recent", {})
    assert refused.status_code == 401 and refused.json()["error"]["data"]["error"] == "invalid_token"
