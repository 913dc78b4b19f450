"""What a new user meets in the first hour (issue 14): the served address is the address, names a generated
client can live with, scores an agent can trust, MCP results that name the item, a CLI an operator expects."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests import fixtures_media as fm
from tests.ingest.test_uploads import upload
from tests.mcp.test_mcp import rpc
from tests.stack import ROOT, LiveServer


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


def test_oauth_metadata_names_the_address_the_client_used(unconfigured: LiveServer) -> None:
    """Issuer and resource follow the address served; a client given http://localhost:PORT/api/mcp finds its own
    resource (it must match the URL the client was given)."""
    port = unconfigured.port
    path = "/.well-known/oauth-protected-resource/api/mcp"
    assert httpx.get(unconfigured.url + path).json()["resource"] == f"http://127.0.0.1:{port}/api/mcp"
    local = httpx.get(f"http://localhost:{port}{path}").json()
    assert local == {**local, "resource": f"http://localhost:{port}/api/mcp",
                     "authorization_servers": [f"http://localhost:{port}"]}
    r = httpx.post(f"http://localhost:{port}/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert f'resource_metadata="http://localhost:{port}{path}"' in r.headers["www-authenticate"]
    for host in ("[::1", "localhost:abc"):  # a Host header that is no host[:port]: the address served
        r = httpx.post(f"{unconfigured.url}/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                       headers={"Host": host})
        assert r.status_code == 401 and f'"{unconfigured.url}{path}"' in r.headers["www-authenticate"], host


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


# --- ids are canonical, one rule for REST and MCP (issue 13 item 8) ---------------------------------------

def test_only_canonical_ids_are_accepted(server, api, user) -> None:
    c = api(user.token(write=True))
    folder = user.folder("Canon")
    item = c.post("/api/v1/ingest", json={"kind": "text", "text": "canonical ids only"}).json()["user_item_id"]
    assert c.get(f"/api/v1/items/{item}").status_code == 200
    assert c.get(f"/api/v1/items/{item.upper()}").status_code == 200  # hex digits in either case
    for other in (f"{{{item}}}", f"urn:uuid:{item}", item.replace("-", ""), item[:8] + item[9:] + "0", "0"):
        for r in (c.get(f"/api/v1/items/{other}"), c.delete(f"/api/v1/items/{other}"),
                  c.post(f"/api/v1/items/{other}/folders", json={"folder_ids": [folder]}),
                  c.delete(f"/api/v1/items/{item}/folders/{other}"), c.delete(f"/api/v1/folders/{other}")):
            assert r.status_code == 400 and r.json()["error"] == "invalid_id", (str(r.request.url), r.status_code)
        r = c.get("/api/v1/items", params={"folder_id": other})
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", (other, r.text)
        r = c.post("/api/v1/items/bulk-delete", json={"ids": [other]})
        assert r.status_code == 400 and r.json()["error"] == "invalid_body"
        r = rpc(server, user.token(), "tools/call", {"name": "get_item", "arguments": {"item_id": other}})
        assert r.json()["error"]["code"] == -32602, (other, r.text)
    assert c.get(f"/api/v1/items/{item}").status_code == 200  # nothing was deleted on the way


# --- the contract describes what the server accepts (issue 14 item 2) -------------------------------------

def test_schema_valid_requests_are_accepted(server, api, user) -> None:
    c = api(user.token(write=True))
    r = c.post("/api/v1/uploads/signed-url", json={"mime": "application/pdf", "size": 500.0, "filename": "a.pdf"})
    assert r.status_code == 200, r.text  # 500.0 is an integer in JSON Schema 2020-12
    assert "size=500&" in r.json()["signed_url"]


def test_what_the_schema_refuses_the_server_refuses(server, api, user) -> None:
    c = api(user.token(write=True))
    sign = "/api/v1/uploads/signed-url"
    r = c.post(sign, json={"mime": "application/pdf", "size": 52428801, "filename": "a.pdf"})
    assert r.status_code == 413 and r.json()["error"] == "file_too_large" and r.json()["maxBytes"] == 52428800
    r = c.post(sign, json={"mime": "application/x-sh", "size": 10, "filename": "a.sh"})
    assert r.status_code == 415 and r.json()["error"] == "unsupported_media_type"
    assert ".docx" in r.json()["message"] and ".epub" in r.json()["message"]  # it names what is accepted
    r = c.post(sign, json={"mime": "Application/PDF", "size": 10, "filename": "a.pdf"})
    assert r.status_code == 415  # the allowlist is spelled in lower case, without parameters
    for body in ({"kind": "url"}, {"kind": "text"}, {"kind": "text", "text": "  \n"},
                 {"kind": "url", "url": "https://example.com", "text": "both"}, {"kind": "url", "url": " "}):
        r = c.post("/api/v1/ingest", json=body)
        assert r.status_code == 400 and r.json()["error"] == "invalid_body", (body, r.text)
    r = c.get("/api/v1/search", params={"q": " \t"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_body"
    r = c.post("/api/v1/uploads/finalize", json={"path": "uploads/u/" + "a" * 32 + "/x.pdf", "mime": "application/pdf",
                                                 "size": 10, "filename": "x.pdf"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_body"  # a PDF is finalized as a document


def test_405_names_the_allowed_methods(server, api, user) -> None:
    c = api(user.token(write=True))
    for method, path, allow in (("PATCH", "/api/v1/search", "GET"), ("TRACE", "/api/v1/folders", "GET, POST"),
                                ("GET", "/api/v1/items/bulk-delete", "POST"),
                                ("PUT", f"/api/v1/items/{user.folder('Allow')}", "DELETE, GET, PATCH")):
        r = c.request(method, path)
        assert r.status_code == 405 and r.json()["error"] == "method_not_allowed", (method, path, r.text)
        assert r.headers["allow"] == allow, (method, path, r.headers)


# --- scores an agent can trust (issue 14 item 4) ----------------------------------------------------------

def test_every_returned_hit_scores_above_zero(server, api, user) -> None:
    c = api(user.token(write=True))
    c.post("/api/v1/ingest", json={"kind": "text", "text": "The lone quokka naps in the shade."})
    for mode in ("hybrid", "semantic", "keyword"):
        hits = c.get("/api/v1/search", params={"q": "quokka", "mode": mode}).json()["results"]
        assert len(hits) == 1 and hits[0]["score"] > 0, (mode, hits)
    for i in range(4):
        c.post("/api/v1/ingest", json={"kind": "text", "text": f"Note {i}: wombats dig burrows; quokkas rarely."})
    hits = c.get("/api/v1/search", params={"q": "wombats dig", "limit": 50}).json()["results"]
    scores = [h["score"] for h in hits]
    assert len(hits) == 5 and all(0 < s <= 1 for s in scores) and scores == sorted(scores, reverse=True)
    tool = rpc(server, user.token(), "tools/call", {"name": "search_knowledge_base",
                                                    "arguments": {"query": "lone quokka"}}).json()["result"]
    assert all(h["score"] > 0 for h in tool["structuredContent"]["results"])


# --- MCP results name the item (issue 14 item 5) ----------------------------------------------------------

def test_add_to_knowledge_names_the_item_get_item_takes(server, user) -> None:
    tok = user.token(write=True)
    r = rpc(server, tok, "tools/call", {"name": "add_to_knowledge", "arguments": {"text": "item ids for agents"}})
    added = r.json()["result"]["structuredContent"]
    assert added["item_id"] == added["user_item_id"] != added["content_id"]
    got = rpc(server, tok, "tools/call", {"name": "get_item", "arguments": {"item_id": added["item_id"]}}).json()
    assert got["result"]["structuredContent"]["id"] == added["item_id"]


# --- stopping stops everything (issue 14 item 6) ----------------------------------------------------------

def _wait_gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.2)
    return False


def test_ctrl_c_stops_the_redis_serve_started_and_only_that(tmp_path: Path) -> None:
    from lev.embedded import ensure_redis, stop_redis

    own = tmp_path / "own"
    own.mkdir()
    srv = LiveServer(own, {"LEV_BASE_URL": ""}, log_name="own").start(timeout=300)
    redis_pid = int((own / "redis.pid").read_text())
    assert psutil.pid_exists(redis_pid)
    srv.stop()  # SIGINT, as Ctrl-C
    assert srv.proc is not None and srv.proc.returncode is not None
    assert _wait_gone(redis_pid), "the embedded redis-server outlived lev serve"
    postgres = [p for p in psutil.process_iter(["name", "cmdline"])
                if p.info["name"] == "postgres" and str(own) in " ".join(p.info["cmdline"] or [])]
    assert all(_wait_gone(p.pid) for p in postgres)

    ensure_redis(own)  # a Redis someone else started is left running
    joined_pid = int((own / "redis.pid").read_text())
    srv = LiveServer(own, {"LEV_BASE_URL": ""}, log_name="own-joined").start(timeout=300)
    srv.stop()
    try:
        assert not _wait_gone(joined_pid, timeout=3)
    finally:
        stop_redis(own)


# --- docs that match (issue 14 item 9) --------------------------------------------------------------------

def test_api_docs_are_served_locally(server) -> None:
    r = httpx.get(f"{server.url}/api/v1/docs", timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert 'spec-url="/api/v1/openapi.json"' in r.text and "//" not in r.text.replace("<!doctype", "")
    assert "default-src 'self'" in r.headers["content-security-policy"]
    js = httpx.get(f"{server.url}/api/v1/docs/redoc.standalone.js", timeout=30)
    assert js.status_code == 200 and len(js.content) > 500_000
    import hashlib

    pinned = (ROOT / "web" / "static" / "redoc" / "README.md").read_text()
    assert hashlib.sha256(js.content).hexdigest() in pinned
    assert (ROOT / "web" / "static" / "redoc" / "LICENSE").read_text().startswith("The MIT License")
    for name in ("LICENSE", "CHANGELOG.md"):
        assert (ROOT / name).stat().st_size > 200, name


# --- the first start talks (issue 14 item 7) --------------------------------------------------------------

def test_serve_prints_a_ready_banner_and_no_library_noise(unconfigured: LiveServer) -> None:
    log = unconfigured.log_path.read_text()
    assert f"Lev is ready at {unconfigured.url}" in log
    assert "user create you@example.com --tier pro" in log and "token create --user you@example.com" in log
    assert f"{unconfigured.url}/api/mcp" in log
    # this server's database has accounts already (the session's): the banner says to sign in (issue 51)
    assert f"open {unconfigured.url}/ in a browser and sign in (or create an account)" in log
    assert "[transformers]" not in log and "Warning" not in log, log[:3000]


def test_make_shows_install_progress() -> None:
    import subprocess

    dry = subprocess.run(["make", "-n", "-B", ".venv/.installed"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60).stdout
    assert "==> [1/3] creating" in dry and "==> [3/3] installing Lev" in dry and "torch" not in dry
    assert "uv pip install" in dry and "--quiet -e" not in dry  # uv's own lines show what it resolves and installs
    import tomllib

    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    pinned = next(d.split("#")[0].strip() for d in dev if d.startswith("uv=="))
    assert pinned in dry  # the installer itself is pinned, to the version the dev tools name


# --- long ingests show progress (issue 14 item 11) --------------------------------------------------------

def test_processing_item_reports_progress(server, api, user) -> None:
    c = api(user.token(write=True))
    words = ["harbour", "lantern", "quartz", "meadow", "cobalt", "orchard", "glacier", "saffron", "tundra", "violet"]
    paragraphs = [" ".join(f"{words[(i + j) % 10]}{i}x{j}" for j in range(60)) + "." for i in range(60)]
    r = c.post("/api/v1/ingest", json={"kind": "text", "text": "\n\n".join(paragraphs), "title": "Long"})
    assert r.status_code == 200 and r.json()["status"] == "processing", r.text
    item_id = r.json()["user_item_id"]
    seen: list[dict] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        item = c.get(f"/api/v1/items/{item_id}").json()
        if item["status"] != "processing":
            break
        seen.append(item["processing"])
        time.sleep(0.05)
    assert item["status"] == "ready" and item["processing"] is None, item["status"]
    embedding = [p for p in seen if p["stage"] == "embedding"]
    assert embedding, seen[:5]
    total = embedding[0]["total"]
    assert total > 64 and all(p["total"] == total and 0 <= p["done"] < total for p in embedding)
    dones = [p["done"] for p in embedding]
    assert dones == sorted(dones) and len(set(dones)) >= 2, dones  # it moved while we watched
    tool = rpc(server, user.token(), "tools/call", {"name": "get_item", "arguments": {"item_id": item_id}}).json()
    assert tool["result"]["structuredContent"]["processing"] is None
