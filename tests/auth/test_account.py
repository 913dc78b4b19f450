"""The account API (/api/account) and browser sessions on /api/v1, over HTTP against the live server:
sign-up, sign-in, throttling, CSRF, tokens, password change, activity, and every error path."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.stack import ROOT, Admin, LiveServer, make_item, new_user

PASSWORD = "correct horse battery"


def _email() -> str:
    return f"web{uuid.uuid4().hex[:10]}@example.com"


class Browser:
    """A cookie-keeping client that signs up or in like the web app does and sends X-CSRF-Token."""

    def __init__(self, base: str) -> None:
        self.client = httpx.Client(base_url=base, timeout=60)
        self.csrf = ""
        self.email = ""
        self.user_id = ""

    def signup(self, email: str | None = None, password: str = PASSWORD) -> httpx.Response:
        self.email = email or _email()
        r = self.client.post("/api/account/signup", json={"email": self.email, "password": password})
        if r.status_code == 201:
            self.csrf, self.user_id = r.json()["csrf_token"], r.json()["user_id"]
        return r

    def login(self, email: str, password: str = PASSWORD) -> httpx.Response:
        r = self.client.post("/api/account/login", json={"email": email, "password": password})
        if r.status_code == 200:
            self.email, self.csrf, self.user_id = email, r.json()["csrf_token"], r.json()["user_id"]
        return r

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"X-CSRF-Token": self.csrf, **kw.pop("headers", {})}
        return self.client.request(method, path, headers=headers, **kw)


@pytest.fixture
def browser(server) -> Browser:  # type: ignore[no-untyped-def]
    return Browser(server.url)


def _pro(admin: Admin, b: Browser) -> None:
    admin.sql("UPDATE users SET tier = 'pro' WHERE id = :u", u=b.user_id)


def _wait_activity(b: Browser, predicate: Any, **params: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        body = b.client.get("/api/account/activity", params=params).json()
        if predicate(body) or time.monotonic() > deadline:
            return body
        time.sleep(0.3)


def test_signup_sets_a_session_cookie_and_get_account(browser: Browser) -> None:
    r = browser.signup()
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == {"user_id", "email", "tier", "csrf_token"} and body["tier"] == "free"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("lev_session=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Path=/" in cookie and "Secure" not in cookie  # http base URL
    me = browser.client.get("/api/account")
    assert me.status_code == 200
    assert me.json()["email"] == browser.email and me.json()["csrf_token"] == body["csrf_token"]
    assert me.json()["usage"]["transcription_minutes_used"] == 0
    assert me.json()["usage"]["transcription_minutes_cap"] == 0
    assert me.json()["usage"]["month"] == time.strftime("%Y-%m", time.gmtime())


def test_signup_errors(browser: Browser, server) -> None:  # type: ignore[no-untyped-def]
    assert browser.signup().status_code == 201
    again = httpx.post(f"{server.url}/api/account/signup", json={"email": browser.email.upper(), "password": PASSWORD})
    assert again.status_code == 409 and again.json()["error"] == "email_taken"
    for bad in ({"email": _email()}, {"email": _email(), "password": "short"},
                {"email": "no-at-sign", "password": PASSWORD}, {"email": _email(), "password": PASSWORD, "tier": "pro"},
                {"email": " @ ", "password": PASSWORD}):
        r = httpx.post(f"{server.url}/api/account/signup", json=bad)
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", (bad, r.text)
    r = httpx.post(f"{server.url}/api/account/signup", content=b"{not json",
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_body"


def test_login_wrong_credentials_give_no_hint(browser: Browser, server) -> None:  # type: ignore[no-untyped-def]
    browser.signup()
    wrong_pw = httpx.post(f"{server.url}/api/account/login", json={"email": browser.email, "password": "nope-nope"})
    unknown = httpx.post(f"{server.url}/api/account/login", json={"email": _email(), "password": PASSWORD})
    assert wrong_pw.status_code == unknown.status_code == 401
    assert wrong_pw.json() == unknown.json()
    assert wrong_pw.json()["error"] == "invalid_credentials"
    assert "set-cookie" not in wrong_pw.headers
    other = Browser(server.url)
    r = other.login(browser.email.upper())  # emails compare case-insensitively
    assert r.status_code == 200 and r.json()["user_id"] == browser.user_id
    assert other.client.get("/api/account").status_code == 200
    bad = httpx.post(f"{server.url}/api/account/login", json={"email": browser.email})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_body"


def test_sign_in_throttled_per_email(browser: Browser, server) -> None:  # type: ignore[no-untyped-def]
    browser.signup()
    for _ in range(10):
        r = httpx.post(f"{server.url}/api/account/login", json={"email": browser.email, "password": "wrong-wrong"})
        assert r.status_code == 401
    r = httpx.post(f"{server.url}/api/account/login", json={"email": browser.email, "password": PASSWORD})
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "rate_limited" and r.json()["retry_after_sec"] > 0
    assert int(r.headers["retry-after"]) == r.json()["retry_after_sec"]
    # another account from the same address is not locked out by it
    other = Browser(server.url)
    assert other.signup().status_code == 201
    assert Browser(server.url).login(other.email).status_code == 200


def test_cli_created_user_signs_in_after_set_password(server) -> None:  # type: ignore[no-untyped-def]
    email = _email()

    def lev(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lev.cli", *args], input=stdin, capture_output=True, text=True,
                              cwd=ROOT, env={**os.environ}, timeout=120)

    assert lev("user", "create", email).returncode == 0
    b = Browser(server.url)
    assert b.login(email).status_code == 401  # no password yet
    assert lev("user", "set-password", email, "--password-stdin", stdin=PASSWORD + "\n").returncode == 0
    assert b.login(email).status_code == 200


def test_csrf_required_on_unsafe_cookie_calls(browser: Browser) -> None:
    browser.signup()
    for headers in ({}, {"X-CSRF-Token": "forged"}):
        r = browser.client.post("/api/account/logout", headers=headers)
        assert r.status_code == 403 and r.json()["error"] == "csrf_failed"
        r = browser.client.post("/api/v1/folders", json={"name": "x"}, headers=headers)
        assert r.status_code == 403 and r.json()["error"] == "csrf_failed"
        r = browser.client.delete("/api/account/activity", headers=headers)
        assert r.status_code == 403 and r.json()["error"] == "csrf_failed"
    assert browser.client.get("/api/v1/folders").json() == {"folders": []}  # the refused create changed nothing
    r = browser.call("POST", "/api/account/logout")
    assert r.status_code == 200 and "Max-Age=0" in r.headers["set-cookie"]
    gone = browser.client.get("/api/account")
    assert gone.status_code == 401 and gone.json()["error"] == "not_signed_in"


def test_a_malformed_foreign_cookie_beside_the_session_is_ignored(browser: Browser, server) -> None:  # type: ignore[no-untyped-def]
    """Another app on the same host can leave a cookie Python's strict parser refuses (it answered 500); browsers
    and the pages skip it, and so must the account API and /api/v1."""
    browser.signup()
    session = browser.client.cookies["lev_session"]
    odd = f'theme="dark; #^_g=1; lev_session={session}; x=a\\"b'
    for method, path in (("GET", "/api/account"), ("GET", "/api/v1/folders"), ("GET", "/api/account/tokens")):
        r = httpx.request(method, f"{server.url}{path}", headers={"Cookie": odd})
        assert r.status_code == 200, (path, r.text)
    r = httpx.post(f"{server.url}/api/account/logout", headers={"Cookie": "#^_g=1; theme=\"dark"})
    assert r.status_code == 401 and r.json()["error"] == "not_signed_in", r.text
    r = httpx.post(f"{server.url}/api/account/logout", headers={"Cookie": odd, "X-CSRF-Token": browser.csrf})
    assert r.status_code == 200 and "Max-Age=0" in r.headers["set-cookie"], r.text
    assert httpx.get(f"{server.url}/api/account", headers={"Cookie": odd}).status_code == 401


def test_a_bearer_token_never_reaches_the_account_api(browser: Browser, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]
    browser.signup()
    _pro(admin, browser)
    token = browser.call("POST", "/api/account/tokens", json={"name": "agent", "write": True}).json()["token"]
    h = {"Authorization": f"Bearer {token}"}
    for method, path in (("GET", "/api/account"), ("GET", "/api/account/tokens"), ("POST", "/api/account/tokens"),
                         ("DELETE", "/api/account/activity"), ("GET", "/api/account/activity")):
        r = httpx.request(method, f"{server.url}{path}", headers=h, json={"name": "x"} if method == "POST" else None)
        assert r.status_code == 401 and r.json()["error"] == "not_signed_in", (path, r.text)
    assert httpx.get(f"{server.url}/api/v1/folders", headers=h).status_code == 200
    r = httpx.get(f"{server.url}/api/account", cookies={"lev_session": "made-up"})
    assert r.status_code == 401 and r.json()["error"] == "not_signed_in"


def test_free_tier_mint_is_refused_with_tier_cap_used(browser: Browser) -> None:
    browser.signup()
    r = browser.call("POST", "/api/account/tokens", json={"name": "agent"})
    assert r.status_code == 402
    assert r.json()["error"] == "payment_required"
    assert (r.json()["tier"], r.json()["cap"], r.json()["used"]) == ("free", 0, 0)
    assert browser.client.get("/api/account/tokens").json() == {"tokens": []}


def test_tokens_mint_list_revoke(browser: Browser, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]
    browser.signup()
    _pro(admin, browser)
    folder = browser.call("POST", "/api/v1/folders", json={"name": "Research"}).json()["id"]
    r = browser.call("POST", "/api/account/tokens",
                     json={"name": "claude", "folder_ids": [folder], "expires_in_days": 30})
    assert r.status_code == 201, r.text
    minted = r.json()
    assert minted["token"].startswith("lev_") and minted["capabilities"] == ["read"]
    assert minted["is_unscoped"] is False and minted["folder_ids"] == [folder] and minted["kb_only"] is True
    days = (time.mktime(time.strptime(minted["expires_at"][:19], "%Y-%m-%dT%H:%M:%S")) - time.time()) / 86400
    assert 29.9 < days < 30.1
    h = {"Authorization": f"Bearer {minted['token']}"}
    assert [f["id"] for f in httpx.get(f"{server.url}/api/v1/folders", headers=h).json()["folders"]] == [folder]
    listing = browser.client.get("/api/account/tokens")
    assert minted["token"] not in listing.text
    (row,) = listing.json()["tokens"]
    assert row["id"] == minted["id"] and row["revoked_at"] is None and row["writes_this_month"] == 0
    assert row["prefix"] == minted["token"][:12]
    # errors: bad body, a folder that is not the user's, a bad id, another user's token
    for bad in ({}, {"name": "x", "expires_in_days": 0}, {"name": "x", "write": "yes"}, {"name": "x", "scope": "all"}):
        r = browser.call("POST", "/api/account/tokens", json=bad)
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", (bad, r.text)
    r = browser.call("POST", "/api/account/tokens", json={"name": "x", "folder_ids": [str(uuid.uuid4())]})
    assert r.status_code == 404 and r.json()["error"] == "folder_not_found"
    assert browser.call("DELETE", "/api/account/tokens/not-a-uuid").json()["error"] == "invalid_id"
    stranger = new_user(admin)
    stranger.token()
    foreign = stranger.admin.sql("SELECT id FROM tokens WHERE user_id = :u", u=stranger.id)[0][0]
    r = browser.call("DELETE", f"/api/account/tokens/{foreign}")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    assert admin.sql("SELECT revoked_at FROM tokens WHERE id = :t", t=foreign)[0][0] is None
    # revoke: 401 from then on; revoking again answers the same revoked_at
    r = browser.call("DELETE", f"/api/account/tokens/{minted['id']}")
    assert r.status_code == 200 and r.json()["id"] == minted["id"] and r.json()["revoked_at"]
    again = browser.call("DELETE", f"/api/account/tokens/{minted['id']}")
    assert again.json() == r.json()
    r = httpx.get(f"{server.url}/api/v1/folders", headers=h)
    assert r.status_code == 401 and r.json()["error"] == "invalid_token"


def test_password_change_revokes_every_token_and_other_sessions(browser: Browser, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]
    browser.signup()
    _pro(admin, browser)
    tokens = [browser.call("POST", "/api/account/tokens", json={"name": f"t{i}"}).json()["token"] for i in range(2)]
    elsewhere = Browser(server.url)
    assert elsewhere.login(browser.email).status_code == 200
    r = browser.call("POST", "/api/account/password", json={"current_password": "wrong-one", "new_password": "x" * 12})
    assert r.status_code == 401 and r.json()["error"] == "invalid_credentials"
    r = browser.call("POST", "/api/account/password", json={"current_password": PASSWORD, "new_password": "short"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_body"
    r = browser.client.post("/api/account/password", json={"current_password": PASSWORD, "new_password": "y" * 12})
    assert r.status_code == 403 and r.json()["error"] == "csrf_failed"
    for t in tokens:  # nothing changed by the refused calls
        assert httpx.get(f"{server.url}/api/v1/folders", headers={"Authorization": f"Bearer {t}"}).status_code == 200
    r = browser.call("POST", "/api/account/password",
                     json={"current_password": PASSWORD, "new_password": "n3w pass phrase"})
    assert r.status_code == 200 and r.json()["revoked_tokens"] == 2
    for t in tokens:
        r = httpx.get(f"{server.url}/api/v1/folders", headers={"Authorization": f"Bearer {t}"})
        assert r.status_code == 401 and r.json()["error"] == "invalid_token"
    assert browser.client.get("/api/account").status_code == 200  # this browser has a fresh session
    assert elsewhere.client.get("/api/account").status_code == 401  # the other one is signed out
    assert Browser(server.url).login(browser.email).status_code == 401
    assert Browser(server.url).login(browser.email, "n3w pass phrase").status_code == 200


def test_session_uses_rest_as_its_user(browser: Browser, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]
    browser.signup()
    _pro(admin, browser)
    user = new_user(admin)  # someone else's library stays invisible
    make_item(user, title="not yours")
    uid = uuid.UUID(browser.user_id)
    from tests.stack import User

    me = User(uid, browser.email, admin)
    hidden = make_item(me, title="kept out of KB", in_kb=False)
    r = browser.call("POST", "/api/v1/ingest", json={"kind": "text", "text": "Octopuses have three hearts.",
                                                     "title": "Octopus"})
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    titles = {i["title"] for i in browser.client.get("/api/v1/items").json()["items"]}
    assert titles == {"kept out of KB", "Octopus"}
    assert browser.client.get(f"/api/v1/items/{hidden}").status_code == 200
    hits = browser.client.get("/api/v1/search", params={"q": "octopus hearts"}).json()["results"]
    assert hits and hits[0]["title"] == "Octopus"
    token = browser.call("POST", "/api/account/tokens", json={"name": "rest"}).json()
    h = {"Authorization": f"Bearer {token['token']}"}
    assert httpx.get(f"{server.url}/api/v1/items/{hidden}", headers=h).status_code == 404  # kb_only token
    body = _wait_activity(browser, lambda b: b["total"] >= 1, surface="rest")
    assert {e["surface"] for e in body["entries"]} == {"rest"} and body["entries"][0]["token_id"] == token["id"]
    web = _wait_activity(browser, lambda b: any(e["query"] == "octopus hearts" for e in b["entries"]), surface="web")
    methods = [e["method"] for e in web["entries"]]
    assert "GET /api/v1/search" in methods and "POST /api/v1/ingest" in methods
    assert "POST /api/account/signup" in methods
    assert all(e["token_id"] is None for e in web["entries"])
    by_token = browser.client.get("/api/account/activity", params={"token_id": token["id"]}).json()
    assert by_token["total"] == 1
    page = browser.client.get("/api/account/activity", params={"per_page": 2, "page": 2}).json()
    assert len(page["entries"]) == 2 and page["page"] == 2 and page["total"] > 4
    r = browser.client.get("/api/account/activity", params={"surface": "ftp"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_body"
    r = browser.client.get("/api/account/activity", params={"token_id": "nope"})
    assert r.status_code == 400
    time.sleep(0.5)  # the previous requests' entries are recorded just after their responses
    cleared = browser.call("DELETE", "/api/account/activity")
    assert cleared.status_code == 200 and cleared.json()["cleared"] >= page["total"]
    time.sleep(1.2)  # past the activity writer's flush
    assert browser.client.get("/api/account/activity").json()["total"] == 0


def test_patch_folder_and_item(browser: Browser, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]
    browser.signup()
    _pro(admin, browser)
    a = browser.call("POST", "/api/v1/folders", json={"name": "Alpha"}).json()["id"]
    browser.call("POST", "/api/v1/folders", json={"name": "Beta"})
    r = browser.call("PATCH", f"/api/v1/folders/{a}", json={"name": "  Gamma "})
    assert r.status_code == 200 and r.json()["name"] == "Gamma" and r.json()["item_count"] == 0
    r = browser.call("PATCH", f"/api/v1/folders/{a}", json={"name": "BETA"})
    assert r.status_code == 409 and r.json()["error"] == "name_taken"
    for bad in ({}, {"name": ""}, {"name": "   "}, {"name": "x", "color": "red"}):
        r = browser.call("PATCH", f"/api/v1/folders/{a}", json=bad)
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", bad
    assert browser.call("PATCH", f"/api/v1/folders/{uuid.uuid4()}", json={"name": "Z"}).status_code == 404
    assert browser.call("PATCH", "/api/v1/folders/xyz", json={"name": "Z"}).json()["error"] == "invalid_id"
    write = browser.call("POST", "/api/account/tokens", json={"name": "w", "write": True}).json()["token"]
    read = browser.call("POST", "/api/account/tokens", json={"name": "r"}).json()["token"]
    scoped = browser.call("POST", "/api/account/tokens", json={"name": "s", "write": True, "folder_ids": [a]}).json()
    api = lambda tok: httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tok}"})  # noqa: E731
    r = api(read).patch(f"/api/v1/folders/{a}", json={"name": "Delta"})
    assert r.status_code == 403 and r.json()["error"] == "capability_denied"
    r = api(scoped["token"]).patch(f"/api/v1/folders/{a}", json={"name": "Delta"})
    assert r.status_code == 403 and r.json()["error"] == "forbidden_scope"
    assert api(write).patch(f"/api/v1/folders/{a}", json={"name": "Delta"}).json()["name"] == "Delta"
    other = new_user(admin)
    theirs = other.folder("Theirs")
    assert api(write).patch(f"/api/v1/folders/{theirs}", json={"name": "Mine"}).status_code == 404
    # items
    item = browser.call("POST", "/api/v1/ingest", json={"kind": "text", "text": "Tardigrades survive space."}).json()
    iid = item["user_item_id"]
    r = browser.call("PATCH", f"/api/v1/items/{iid}", json={"title": " Water bears ", "archived": True})
    assert r.status_code == 200 and r.json()["title"] == "Water bears" and r.json()["archived"] is True
    r = api(write).patch(f"/api/v1/items/{iid}", json={"in_kb": False})
    assert r.status_code == 200 and r.json()["in_kb"] is False
    assert api(write).get(f"/api/v1/items/{iid}").status_code == 404  # kb_only token no longer sees it
    assert browser.client.get("/api/v1/search", params={"q": "tardigrades"}).json()["results"] == []
    assert api(write).patch(f"/api/v1/items/{iid}", json={"in_kb": True}).status_code == 404
    assert browser.call("PATCH", f"/api/v1/items/{iid}", json={"in_kb": True}).json()["in_kb"] is True
    assert browser.client.get("/api/v1/search", params={"q": "tardigrades"}).json()["results"]
    for bad in ({}, {"title": ""}, {"title": "   "}, {"in_kb": "no"}, {"status": "ready"}):
        r = browser.call("PATCH", f"/api/v1/items/{iid}", json=bad)
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", bad
    r = api(read).patch(f"/api/v1/items/{iid}", json={"archived": False})
    assert r.status_code == 403 and r.json()["error"] == "capability_denied"
    r = api(scoped["token"]).patch(f"/api/v1/items/{iid}", json={"archived": False})
    assert r.status_code == 404  # unfiled: outside the one-folder scope
    foreign = make_item(other, title="x")
    assert browser.call("PATCH", f"/api/v1/items/{foreign}", json={"archived": True}).status_code == 404
    counted = {t["name"]: t["writes_this_month"] for t in browser.client.get("/api/account/tokens").json()["tokens"]}
    assert counted["w"] == 4  # every write call of the token counts, refused ones too


@pytest.fixture(scope="module")
def closed_server(data_dir: Path, server) -> Iterator[LiveServer]:  # type: ignore[no-untyped-def]
    """Sign-up closed, an https base URL (Secure cookies) and a small per-address sign-in budget."""
    srv = LiveServer(data_dir, {"LEV_SIGNUP": "closed", "LEV_BASE_URL": "https://lev.example",
                                "LEV_LIMIT_SIGN_IN_IP": "3/hour", "LEV_LIMIT_CLIENT_REGISTRATION_IP": "2/hour"},
                     log_name="closed").start()
    yield srv
    srv.stop()


def test_signup_closed_secure_cookie_and_per_address_throttle(closed_server: LiveServer, server) -> None:  # type: ignore[no-untyped-def]
    r = httpx.post(f"{closed_server.url}/api/account/signup", json={"email": _email(), "password": PASSWORD})
    assert r.status_code == 403 and r.json()["error"] == "signup_closed"
    existing = Browser(server.url)
    assert existing.signup().status_code == 201
    r = httpx.post(f"{closed_server.url}/api/account/login", json={"email": existing.email, "password": PASSWORD})
    assert r.status_code == 200 and "; Secure" in r.headers["set-cookie"]
    for _ in range(3):  # three different accounts' failures from one address
        r = httpx.post(f"{closed_server.url}/api/account/login", json={"email": _email(), "password": "wrong-wrong"})
        assert r.status_code == 401
    r = httpx.post(f"{closed_server.url}/api/account/login", json={"email": existing.email, "password": PASSWORD})
    assert r.status_code == 429 and r.json()["error"] == "rate_limited" and r.json()["limit"] == "sign_in_ip"


def test_oauth_client_registration_has_a_per_address_budget(closed_server: LiveServer, admin: Admin) -> None:
    def register(name: str) -> httpx.Response:
        return httpx.post(f"{closed_server.url}/oauth/register",
                          json={"client_name": name, "redirect_uris": ["http://127.0.0.1:9/callback"]})

    names = [f"dcr-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    assert [register(n).status_code for n in names[:2]] == [201, 201]
    r = register(names[2])
    assert r.status_code == 429 and r.json()["error"] == "rate_limited", r.text
    assert "client registrations" in r.json()["error_description"] and int(r.headers["retry-after"]) > 0
    stored = admin.sql("SELECT count(*) FROM oauth_clients WHERE client_name = ANY(:n)", n=names)[0][0]
    assert stored == 2  # the refused registration left nothing behind


def test_library_page_lists_unfiled_items_and_filed_ones_apart(browser: Browser, admin: Admin) -> None:
    browser.signup()
    from tests.stack import User

    me = User(uuid.UUID(browser.user_id), browser.email, admin)
    folder = me.folder("Shelf")
    make_item(me, title="filed away", folders=[folder])
    make_item(me, title="loose note")

    def titles(query: str) -> set[str]:
        html = browser.client.get(f"/{query}").text
        return {t for t in ("filed away", "loose note") if t in html}

    assert titles("") == {"filed away", "loose note"}
    assert titles("?unfiled=true") == {"loose note"}
    assert titles("?unfiled=false") == {"filed away"}
    assert 'href="/?unfiled=true" aria-current="page"' in browser.client.get("/?unfiled=true").text
    partial = browser.client.get("/partials/items?unfiled=true").text
    assert "loose note" in partial and "filed away" not in partial
