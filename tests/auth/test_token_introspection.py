"""GET /api/v1/token: a token describes itself (scope with folder names, capabilities, writes, hourly budgets)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tests.stack import LiveServer

LIMITED = {"LEV_LIMIT_READ": "5 per 60 seconds", "LEV_LIMIT_INGEST": "7 per 60 seconds"}


@pytest.fixture(scope="module")
def limited(data_dir: Path, admin) -> Iterator[LiveServer]:  # type: ignore[no-untyped-def]
    srv = LiveServer(data_dir, LIMITED, log_name="introspect").start()
    yield srv
    srv.stop()


def err(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error"] == code


def test_one_folder_read_token_sees_its_scope(server, api, user) -> None:
    research = user.folder("Research")
    user.folder("Private")
    tok = user.token(folders=[research], name="claude-desktop", expires_in_days=30)
    r = api(tok).get("/api/v1/token")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["name"] == "claude-desktop"
    assert body["capabilities"] == ["read"]
    assert body["whole_library"] is False
    assert body["folders"] == [{"id": research, "name": "Research"}]
    assert body["kb_only"] is True
    days = (datetime.fromisoformat(body["expires_at"]) - datetime.fromisoformat(body["created_at"])).days
    assert days in (29, 30)
    assert body["monthly_writes"]["cap"] is None and body["monthly_writes"]["remaining"] is None
    assert body["monthly_writes"]["used"] == 0 and body["monthly_writes"]["resets_in_sec"] > 0
    assert body["hourly"] is None  # the session server runs with LEV_RATE_LIMITS=off


def test_whole_library_write_token_counts_its_writes(server, api, user) -> None:
    tok = user.token(write=True, kb_only=False, write_cap=10)
    c = api(tok)
    for i in range(3):
        assert c.post("/api/v1/ingest", json={"kind": "text", "text": f"note {i} about herons"}).status_code == 200
    body = c.get("/api/v1/token").json()
    assert body["whole_library"] is True and body["folders"] is None
    assert body["capabilities"] == ["read", "write"] and body["kb_only"] is False
    assert body["monthly_writes"] == {**body["monthly_writes"], "used": 3, "cap": 10, "remaining": 7}
    # a token without a cap still reports what it wrote
    free = api(user.token(write=True))
    assert free.post("/api/v1/ingest", json={"kind": "text", "text": "uncapped heron note"}).status_code == 200
    w = free.get("/api/v1/token").json()["monthly_writes"]
    assert w["used"] == 1 and w["cap"] is None and w["remaining"] is None


def test_hourly_budgets_left(limited, user) -> None:
    def client(tok: str) -> httpx.Client:
        return httpx.Client(base_url=limited.url, headers={"Authorization": f"Bearer {tok}"}, timeout=60)

    reader = client(user.token())
    assert reader.get("/api/v1/folders").status_code == 200
    body = reader.get("/api/v1/token").json()
    assert set(body["hourly"]) == {"read"}  # a read-only token has no write budgets to report
    read = body["hourly"]["read"]
    assert read["limit"] == 5 and read["remaining"] == 3 and read["window"] == "60 seconds"
    assert 0 < read["resets_in_sec"] <= 60

    writer = client(user.token(write=True))
    assert writer.post("/api/v1/ingest", json={"kind": "text", "text": "budget note"}).status_code == 200
    hourly = writer.get("/api/v1/token").json()["hourly"]
    assert set(hourly) == {"read", "ingest", "delete", "bulk", "mcp_write"}
    assert hourly["ingest"]["remaining"] == 6 and hourly["read"]["remaining"] == 4

    # the introspection call is itself a read: past the budget it is refused like any other
    for _ in range(3):
        assert reader.get("/api/v1/token").status_code == 200
    r = reader.get("/api/v1/token")
    err(r, 429, "rate_limited")
    assert int(r.headers["retry-after"]) >= 1


def test_introspection_needs_a_valid_token(server, api, user, admin) -> None:
    err(api(None).get("/api/v1/token"), 401, "missing_bearer_token")
    err(api("lev_" + "y" * 43).get("/api/v1/token"), 401, "invalid_token")
    tok = user.token(name="to-revoke")
    assert api(tok).get("/api/v1/token").status_code == 200
    admin.sql("UPDATE tokens SET revoked_at = now() WHERE user_id = :u AND name = 'to-revoke'", u=user.id)
    err(api(tok).get("/api/v1/token"), 401, "invalid_token")
    expired = user.token(name="to-expire")
    admin.sql("UPDATE tokens SET expires_at = now() - interval '1 second' WHERE user_id = :u AND name = 'to-expire'",
              u=user.id)
    err(api(expired).get("/api/v1/token"), 401, "invalid_token")
    r = api(user.token()).post("/api/v1/token")
    err(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "GET"


def test_browser_session_is_not_a_token(server) -> None:
    from tests.auth.test_account import Browser

    b = Browser(server.url)
    assert b.signup().status_code == 201
    err(b.call("GET", "/api/v1/token"), 404, "not_found")
