"""What a new user meets in the first hour (issue 14): the served address is the address, names a generated
client can live with, scores an agent can trust, MCP results that name the item, a CLI an operator expects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import fixtures_media as fm
from tests.stack import LiveServer
from tests.test_mcp import rpc
from tests.test_uploads import upload


@pytest.fixture(scope="module")
def unconfigured(data_dir: Path, admin) -> Iterator[LiveServer]:  # type: ignore[no-untyped-def]
    """A server with LEV_BASE_URL unset, on a port other than 8080."""
    srv = LiveServer(data_dir, {"LEV_BASE_URL": "", "LEV_RATE_LIMITS": "off"}, log_name="unconfigured").start()
    yield srv
    srv.stop()


def test_signed_upload_url_follows_the_served_address(unconfigured: LiveServer, user, tmp_path: Path) -> None:
    c = httpx.Client(base_url=unconfigured.url, headers={"Authorization": f"Bearer {user.token(write=True)}"},
                     timeout=60)
    pdf = fm.make_text_pdf(tmp_path / "served.pdf", ["The served address is the address."])
    signed, r = upload(c, pdf, "application/pdf")
    assert signed["signed_url"].startswith(f"{unconfigured.url}/api/v1/uploads/put/"), signed["signed_url"]
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "ready"


def test_mcp_accepts_the_served_origin_only(unconfigured: LiveServer, user) -> None:
    tok = user.token()
    port = unconfigured.port
    for origin in (unconfigured.url, f"http://localhost:{port}"):
        r = rpc(unconfigured, tok, "ping", headers={"Origin": origin})
        assert r.status_code == 200, (origin, r.text)
    for origin in ("http://127.0.0.1:8080", "https://evil.example", f"http://127.0.0.2:{port}"):
        r = rpc(unconfigured, tok, "ping", headers={"Origin": origin})
        assert r.status_code == 403, origin
        assert r.json()["error"]["data"]["error"] == "forbidden_origin"


def test_configured_base_url_wins(server: LiveServer, user) -> None:
    """The session server runs with LEV_BASE_URL set (as behind a proxy): that URL, and only it, is used."""
    c = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {user.token(write=True)}"},
                     timeout=60)
    r = c.post("/api/v1/uploads/signed-url", json={"mime": "application/pdf", "size": 10, "filename": "a.pdf"})
    assert r.status_code == 200, r.text
    assert r.json()["signed_url"].startswith(f"{server.url}/api/v1/uploads/put/")
    r = rpc(server, user.token(), "ping", headers={"Origin": f"http://localhost:{server.port}"})
    assert r.status_code == 403
