"""The `lev` CLI as an operator uses it, against the same data dir as the running server (its listings, help and
settings are in test_cli_admin.py: two files, so parallel runs share the work)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import httpx

from tests.stack import ROOT


def lev(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lev.cli", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ}, timeout=120)


def test_cli_user_token_folder_flow_while_server_runs(server) -> None:
    email = f"cli{uuid.uuid4().hex[:8]}@Example.com"
    r = lev("user", "create", email, "--tier", "pro")
    assert r.returncode == 0, r.stderr
    uuid.UUID(r.stdout.strip())
    assert lev("user", "create", email.lower()).returncode != 0  # case-insensitive unique
    folder = lev("folder", "create", "--user", email, "Inbox").stdout.strip()
    uuid.UUID(folder)
    r = lev("token", "create", "--user", email, "--name", "t", "--write")
    assert r.returncode == 0, r.stderr
    token = r.stdout.strip()
    assert token.startswith("lev_") and "\n" not in token and len(token) >= 36
    scoped = lev("token", "create", "--user", email, "--name", "s", "--folder", folder).stdout.strip()
    h = {"Authorization": f"Bearer {token}"}
    names = [f["name"] for f in httpx.get(f"{server.url}/api/v1/folders", headers=h).json()["folders"]]
    assert names == ["Inbox"]
    listing = lev("token", "list", "--user", email).stdout
    assert "t\t" in listing and token not in listing and token[:12] in listing
    # set-password revokes every token of the user at once
    r = lev("user", "set-password", email, "--password-stdin", stdin="correct horse battery\n")
    assert r.returncode == 0, r.stderr
    for t in (token, scoped):
        resp = httpx.get(f"{server.url}/api/v1/folders", headers={"Authorization": f"Bearer {t}"})
        assert resp.status_code == 401 and resp.json()["error"] == "invalid_token"


def test_cli_revoke_and_free_tier_refusal(server) -> None:
    email = f"free{uuid.uuid4().hex[:8]}@example.com"
    assert lev("user", "create", email).returncode == 0
    r = lev("token", "create", "--user", email, "--name", "x")
    assert r.returncode == 2 and r.stdout == ""
    assert "payment_required" in r.stderr and "tier=free" in r.stderr and "cap=0" in r.stderr and "used=0" in r.stderr
    assert lev("user", "set-tier", email, "pro").returncode == 0
    token = lev("token", "create", "--user", email, "--name", "x").stdout.strip()
    token_id = lev("token", "list", "--user", email).stdout.splitlines()[1].split("\t")[0]
    assert lev("token", "revoke", token_id).returncode == 0
    resp = httpx.get(f"{server.url}/api/v1/folders", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 401
    assert lev("token", "revoke", token_id).returncode != 0
