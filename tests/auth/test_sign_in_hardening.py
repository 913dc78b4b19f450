"""Sign-in and sessions, hardened (issue 32 item 2), over HTTP against live servers: where a sign-in may lead, the
sign-in and sign-up budgets under parallel bursts, and the one password change (account API and `lev user
set-password`) ending every token, grant, session and pending authorization code."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest

from lev.auth.accounts import safe_next
from tests.oauth.test_oauth import CALLBACK, Person, _pkce, mcp_call
from tests.stack import ROOT, Admin, LiveServer

PASSWORD = "a long enough password"
BURST = 30

# What a browser would turn into another origin after sign-in (sent as the raw query string of /login).
EVIL_NEXT = ["/%5Cevil.example/x", "/%5C%5Cevil.example", "/%09/evil.example", "/%0A/evil.example",
             "/%0D%0A/evil.example", "/%20/evil.example", "//evil.example", "/%2F%2Fevil.example", "/%2Fevil.example",
             "%2F%2Fevil.example", "https://evil.example/", "javascript:alert(1)", "/%5C/evil.example",
             "/.%5Cevil.example", "/items/%2F%2Fevil.example", "/%2F%5Cevil.example"]


def _email() -> str:
    return f"h{uuid.uuid4().hex[:10]}@example.com"


def _next_of(base: str, raw_query: str) -> str:
    r = httpx.get(httpx.URL(f"{base}/login", query=raw_query.encode()))
    assert r.status_code == 200, r.text
    found = re.search(r'data-then="go:([^"]*)"', r.text)
    assert found, r.text
    return html.unescape(found.group(1))


def test_sign_in_leads_only_to_lev_s_own_paths(server: LiveServer) -> None:
    for evil in EVIL_NEXT:
        assert _next_of(server.url, f"next={evil}") == "/", evil
    target = "/oauth/authorize?client_id=c&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&state=s"
    assert _next_of(server.url, f"next={quote(target, safe='')}") == target  # the consent round trip still works
    assert _next_of(server.url, "next=/items/abc") == "/items/abc"
    for value in ("/\\evil.example", "/\t/evil.example", "/\n/evil.example", "/ /x", "//x", "/%2fx", "/%5cx",
                  "/\x00x", "/\x7fx", "x", "", "/" + "a" * 2001):
        assert safe_next(value) == "/", repr(value)


def _burst(fn: Any, n: int = BURST) -> list[httpx.Response]:
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(fn, range(n)))


def test_a_parallel_burst_of_wrong_passwords_for_one_email_checks_at_most_the_limit(server: LiveServer) -> None:
    email = _email()
    signed_up = httpx.post(f"{server.url}/api/account/signup", json={"email": email, "password": PASSWORD})
    assert signed_up.status_code == 201
    for _ in range(12):  # successful sign-ins do not use up the budget of failures (10 per 15 minutes)
        assert httpx.post(f"{server.url}/api/account/login",
                          json={"email": email, "password": PASSWORD}).status_code == 200
    answers = _burst(lambda n: httpx.post(f"{server.url}/api/account/login", timeout=60,
                                          json={"email": email.upper() if n % 2 else email, "password": f"wrong{n}"}))
    counted = Counter(r.status_code for r in answers)
    print(f"{BURST} parallel wrong passwords for one email: {counted[401]} checked, {counted[429]} refused")
    assert counted == {401: 10, 429: BURST - 10}, counted
    refused = [r.json() for r in answers if r.status_code == 429]
    assert all(b["error"] == "rate_limited" and b["limit"] == "sign_in_email" and b["retry_after_sec"] > 0
               for b in refused), refused[0]
    r = httpx.post(f"{server.url}/api/account/login", json={"email": email, "password": PASSWORD})
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0


@pytest.fixture(scope="module")
def tight(data_dir: Path, server: LiveServer) -> Iterator[LiveServer]:
    """A server with small per-address budgets: 10 failed sign-ins per 15 minutes, 5 sign-ups an hour."""
    srv = LiveServer(data_dir, {"LEV_LIMIT_SIGN_IN_IP": "10/15 minutes", "LEV_LIMIT_SIGN_UP_IP": "5/hour"},
                     log_name="tight-budgets").start()
    yield srv
    srv.stop()


def test_sign_up_is_throttled_per_address_and_a_taken_email_says_no_more(tight: LiveServer, admin: Admin) -> None:
    def sign_up(email: str) -> httpx.Response:
        return httpx.post(f"{tight.url}/api/account/signup", json={"email": email, "password": PASSWORD}, timeout=60)

    taken = _email()
    assert sign_up(taken).status_code == 201
    again = sign_up(taken.upper())
    assert again.status_code == 409 and again.json()["error"] == "email_taken"
    assert taken not in again.text.lower() and "sign in" in again.json()["message"]
    bad = httpx.post(f"{tight.url}/api/account/signup", json={"email": "no-at-sign", "password": PASSWORD})
    assert bad.status_code == 400  # refused bodies do not count: they say nothing about anyone
    assert [sign_up(_email()).status_code for _ in range(3)] == [201] * 3  # five attempts in all
    late = _email()
    r = sign_up(late)
    assert r.status_code == 429 and r.json()["error"] == "rate_limited" and r.json()["limit"] == "sign_up_ip", r.text
    assert int(r.headers["retry-after"]) > 0
    assert admin.sql("SELECT count(*) FROM users WHERE email = :e", e=late)[0][0] == 0


def test_a_parallel_burst_from_one_address_checks_at_most_the_limit(tight: LiveServer) -> None:
    answers = _burst(lambda n: httpx.post(f"{tight.url}/api/account/login", timeout=60,
                                          json={"email": f"nobody{n}-{uuid.uuid4().hex[:6]}@example.com",
                                                "password": "wrong password"}))
    counted = Counter(r.status_code for r in answers)
    print(f"{BURST} parallel wrong sign-ins from one address: {counted[401]} checked, {counted[429]} refused")
    assert counted == {401: 10, 429: BURST - 10}, counted
    assert {r.json()["limit"] for r in answers if r.status_code == 429} == {"sign_in_ip"}


# ------------------------------------------------------------------------------------------------ password change


def _grant_and_pending_code(person: Person, base: str) -> tuple[dict[str, Any], dict[str, str]]:
    """An OAuth grant the person allowed (its tokens), and a second allowed code not yet exchanged."""
    cid = httpx.post(f"{base}/oauth/register", json={"redirect_uris": [CALLBACK], "client_name": "Pw test app",
                                                     "token_endpoint_auth_method": "none"}).json()["client_id"]

    def allowed() -> dict[str, str]:
        verifier, challenge = _pkce()
        url = f"{base}/oauth/authorize?" + urlencode({
            "response_type": "code", "client_id": cid, "redirect_uri": CALLBACK, "code_challenge": challenge,
            "code_challenge_method": "S256", "resource": f"{base}/api/mcp"})
        return {"code": person.approve(url)["code"], "code_verifier": verifier, "client_id": cid,
                "redirect_uri": CALLBACK, "grant_type": "authorization_code"}

    grant = httpx.post(f"{base}/oauth/token", data=allowed()).json()
    assert "access_token" in grant, grant
    return grant, allowed()


def _mint(person: Person) -> str:
    r = person.web.post("/api/account/tokens", json={"name": "agent"}, headers={"X-CSRF-Token": person.csrf})
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


def _lev(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lev.cli", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ}, timeout=120)


def _all_ended(base: str, sessions: list[httpx.Client], token: str, grant: dict[str, Any],
               pending: dict[str, str]) -> None:
    for web in sessions:
        assert web.get("/api/account").status_code == 401
    assert httpx.get(f"{base}/api/v1/folders", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert mcp_call(base, grant["access_token"], "list_recent", {}).status_code == 401
    refreshed = httpx.post(f"{base}/oauth/token", data={"grant_type": "refresh_token",
                                                        "client_id": pending["client_id"],
                                                        "refresh_token": grant["refresh_token"]})
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"
    late = httpx.post(f"{base}/oauth/token", data=pending)  # allowed before the change, exchanged after it
    assert late.status_code == 400 and late.json()["error"] == "invalid_grant", late.text


def test_cli_set_password_follows_the_rules_and_ends_every_session_token_grant_and_code(server: LiveServer,
                                                                                        admin: Admin) -> None:
    base, person = server.url, Person(server.url, admin)
    elsewhere = httpx.Client(base_url=base, timeout=60)
    assert elsewhere.post("/api/account/login", json={"email": person.email, "password": PASSWORD}).status_code == 200
    token = _mint(person)
    grant, pending = _grant_and_pending_code(person, base)

    for weak in ("short", "x" * 1001):
        r = _lev("user", "set-password", person.email, "--password-stdin", stdin=weak + "\n")
        assert r.returncode != 0 and "8 to 1000 characters" in r.stderr, r.stderr
    assert person.web.get("/api/account").status_code == 200  # a refused change changes nothing
    assert httpx.get(f"{base}/api/v1/folders", headers={"Authorization": f"Bearer {token}"}).status_code == 200

    r = _lev("user", "set-password", person.email, "--password-stdin", stdin="the new pass phrase\n")
    assert r.returncode == 0, r.stderr
    assert "2 browser session(s) ended" in r.stderr, r.stderr
    _all_ended(base, [person.web, elsewhere], token, grant, pending)
    again = httpx.post(f"{base}/api/account/login", json={"email": person.email, "password": "the new pass phrase"})
    assert again.status_code == 200


def test_account_password_change_ends_this_session_too_and_hands_out_a_fresh_one(server: LiveServer,
                                                                                admin: Admin) -> None:
    base, person = server.url, Person(server.url, admin)
    elsewhere = httpx.Client(base_url=base, timeout=60)
    assert elsewhere.post("/api/account/login", json={"email": person.email, "password": PASSWORD}).status_code == 200
    token = _mint(person)
    grant, pending = _grant_and_pending_code(person, base)
    old_cookie = person.web.cookies["lev_session"]

    r = person.web.post("/api/account/password", json={"current_password": PASSWORD, "new_password": "n3w pass phrase"},
                        headers={"X-CSRF-Token": person.csrf})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["revoked_tokens"] == 2 and body["ended_sessions"] == 2 and body["csrf_token"] != person.csrf
    assert person.web.cookies["lev_session"] != old_cookie
    stale = httpx.Client(base_url=base, cookies={"lev_session": old_cookie})
    _all_ended(base, [stale, elsewhere], token, grant, pending)
    assert person.web.get("/api/account").json()["csrf_token"] == body["csrf_token"]  # the fresh session works
    minted = person.web.post("/api/account/tokens", json={"name": "after"},
                             headers={"X-CSRF-Token": body["csrf_token"]})
    assert minted.status_code == 201, minted.text
