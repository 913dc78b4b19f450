"""The principal cache keeps revocation immediate across processes: two `lev serve` processes on one stack, a
token served from both caches, then revoked (or its folder deleted, its user's password changed) through one
process or the CLI; the very next request on the other process is refused. OAuth grants too: revoked at
/oauth/revoke, by a refresh token's reuse, in Settings -> Integrations, and their access token rotated away."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from tests.auth.test_account import PASSWORD, Browser
from tests.oauth.test_oauth import CALLBACK, Person, _pkce, mcp_call
from tests.stack import ROOT, Admin, Api, LiveServer

PATH = "/api/v1/folders"


@pytest.fixture(scope="module")
def second(server: LiveServer, data_dir: Path) -> Iterator[LiveServer]:
    """A second API process on the session server's PostgreSQL and Redis (no inline worker), serving the same
    public address (as two processes behind one proxy do), so the MCP resource OAuth grants are for is one."""
    srv = LiveServer(data_dir, {"LEV_RATE_LIMITS": "off", "LEV_WORKERS_INLINE": "false", "LEV_BASE_URL": server.url},
                     log_name="second").start()
    yield srv
    srv.stop()


def _hits(server: LiveServer) -> float:
    """Cache hits of every process on this stack (the metrics directory is shared)."""
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    m = re.search(r'^lev_principal_cache_total\{result="hit"\} ([0-9.e+]+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def _owner(server: LiveServer, admin: Admin) -> Browser:
    b = Browser(server.url)
    assert b.signup().status_code == 201
    admin.sql("UPDATE users SET tier = 'pro' WHERE id = :u", u=b.user_id)
    return b


def _mint(b: Browser, **body: object) -> tuple[str, str]:
    r = b.call("POST", "/api/account/tokens", json={"name": "agent", **body})
    assert r.status_code == 201, r.text
    return r.json()["token"], r.json()["id"]


def _warm(token: str, *servers: LiveServer) -> None:
    """Two requests per process: the second is served from that process's cache."""
    for srv in servers:
        for _ in range(2):
            assert Api(srv.url, token).get(PATH).status_code == 200


def test_revoke_on_one_process_refuses_the_next_request_on_the_other(server: LiveServer, second: LiveServer,
                                                                     admin: Admin) -> None:
    owner = _owner(server, admin)
    token, token_id = _mint(owner)
    before = _hits(server)
    _warm(token, server, second)
    assert _hits(server) >= before + 2  # both processes answered from their caches

    assert owner.call("DELETE", f"/api/account/tokens/{token_id}").status_code == 200  # on the first process
    r = Api(second.url, token).get(PATH)
    assert r.status_code == 401 and r.json()["error"] == "invalid_token"
    assert Api(server.url, token).get(PATH).status_code == 401
    mcp = Api(second.url, token).post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert mcp.status_code == 401


def test_cli_revoke_and_password_change_reach_both_processes(server: LiveServer, second: LiveServer,
                                                             admin: Admin) -> None:
    owner = _owner(server, admin)
    first, first_id = _mint(owner)
    other, _ = _mint(owner)
    _warm(first, server, second)
    _warm(other, server, second)

    revoked = subprocess.run([sys.executable, "-m", "lev.cli", "token", "revoke", first_id], capture_output=True,
                             text=True, cwd=ROOT, env={**os.environ}, timeout=120)
    assert revoked.returncode == 0, revoked.stderr
    assert Api(second.url, first).get(PATH).status_code == 401
    assert Api(server.url, first).get(PATH).status_code == 401
    assert Api(second.url, other).get(PATH).status_code == 200  # the other token lives on

    owner_on_second = Browser(second.url)
    assert owner_on_second.login(owner.email).status_code == 200
    r = owner_on_second.call("POST", "/api/account/password",
                             json={"current_password": PASSWORD, "new_password": "another horse battery"})
    assert r.status_code == 200 and r.json()["revoked_tokens"] == 1
    assert Api(server.url, other).get(PATH).status_code == 401  # changed on the second, refused on the first


def test_deleting_a_tokens_last_folder_on_one_process_refuses_it_on_the_other(server: LiveServer,
                                                                             second: LiveServer,
                                                                             admin: Admin) -> None:
    owner = _owner(server, admin)
    folder = owner.call("POST", "/api/v1/folders", json={"name": "only"}).json()["id"]
    scoped, _ = _mint(owner, folder_ids=[folder])
    whole, _ = _mint(owner, write=True)
    _warm(scoped, server, second)
    assert Api(second.url, whole).delete(f"/api/v1/folders/{folder}").status_code == 200
    assert Api(server.url, scoped).get(PATH).status_code == 401


def test_a_cached_token_ends_at_its_expiry(server: LiveServer, second: LiveServer, admin: Admin) -> None:
    owner = _owner(server, admin)
    token, token_id = _mint(owner)
    admin.sql("UPDATE tokens SET expires_at = now() + interval '2 seconds' WHERE id = :t", t=token_id)
    _warm(token, second)  # cached with its expiry; no change is announced when it passes
    deadline = time.monotonic() + 10
    while Api(second.url, token).get(PATH).status_code == 200:
        assert time.monotonic() < deadline, "the cached token outlived its expiry"
        time.sleep(0.2)
    assert Api(second.url, token).get(PATH).json()["error"] == "invalid_token"


def _grant(server: LiveServer, person: Person, cid: str) -> dict[str, str]:
    """An OAuth grant for a public client: authorize (consent over HTTP with the cookie), exchange the code."""
    verifier, challenge = _pkce()
    q = {"response_type": "code", "client_id": cid, "redirect_uri": CALLBACK, "code_challenge": challenge,
         "code_challenge_method": "S256", "scope": "lev:read", "resource": f"{server.url}/api/mcp"}
    code = person.approve(f"{server.url}/oauth/authorize?{urlencode(q)}")["code"]
    r = httpx.post(f"{server.url}/oauth/token", data={"grant_type": "authorization_code", "client_id": cid,
                                                      "redirect_uri": CALLBACK, "code": code,
                                                      "code_verifier": verifier}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _mcp_status(srv: LiveServer, token: str) -> int:
    return mcp_call(srv.url, token, "list_recent", {}).status_code


def _warm_mcp(token: str, *servers: LiveServer) -> None:
    for srv in servers:
        for _ in range(2):
            assert _mcp_status(srv, token) == 200


def test_oauth_grants_revoked_or_rotated_on_one_process_are_refused_on_the_other(server: LiveServer,
                                                                                second: LiveServer,
                                                                                admin: Admin) -> None:
    person = Person(server.url, admin)
    cid = httpx.post(f"{server.url}/oauth/register", json={"redirect_uris": [CALLBACK],
                                                           "token_endpoint_auth_method": "none"}).json()["client_id"]

    def refresh(srv: LiveServer, rt: str) -> httpx.Response:
        return httpx.post(f"{srv.url}/oauth/token", data={"grant_type": "refresh_token", "refresh_token": rt,
                                                          "client_id": cid}, timeout=60)

    first = _grant(server, person, cid)
    before = _hits(server)
    _warm_mcp(first["access_token"], server, second)
    assert _hits(server) >= before + 2  # both processes answered the grant from their caches
    # cached for the MCP resource, still refused at REST (the audience is part of the cache key)
    assert Api(second.url, first["access_token"]).get(PATH).status_code == 401

    rotated = refresh(server, first["refresh_token"]).json()  # the access token is replaced on the first process
    assert _mcp_status(second, first["access_token"]) == 401
    _warm_mcp(rotated["access_token"], server, second)
    reuse = refresh(second, first["refresh_token"])  # a rotated refresh token again, on the second: grant revoked
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    assert _mcp_status(server, rotated["access_token"]) == 401

    other = _grant(server, person, cid)
    _warm_mcp(other["access_token"], server, second)
    r = httpx.post(f"{second.url}/oauth/revoke", data={"token": other["access_token"], "client_id": cid}, timeout=60)
    assert r.status_code == 200
    assert _mcp_status(server, other["access_token"]) == 401

    last = _grant(server, person, cid)
    _warm_mcp(last["access_token"], server, second)
    grant_id = next(g["id"] for g in person.grants() if g["revoked_at"] is None)  # Settings -> Integrations
    r = person.web.delete(f"/api/account/tokens/{grant_id}", headers={"X-CSRF-Token": person.csrf})
    assert r.status_code == 200
    assert _mcp_status(second, last["access_token"]) == 401
