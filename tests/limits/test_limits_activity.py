"""Rate limits, the monthly write cap and the activity log, against live servers with small limits."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lev.core.clock import seconds_to_month_end
from tests.stack import LiveServer, make_item

SMALL = {
    "LEV_LIMIT_READ": "4 per 3 seconds",
    "LEV_LIMIT_INGEST": "3 per 10 seconds",  # an ingest embeds: on a loaded machine three take over 3 s
    "LEV_LIMIT_DELETE": "2 per 3 seconds",
    "LEV_LIMIT_BULK": "1 per 3 seconds",
    "LEV_LIMIT_MCP_WRITE": "2 per 3 seconds",
    "LEV_TRUSTED_PROXIES": '["127.0.0.1/32"]',
}


@pytest.fixture(scope="module")
def limited(data_dir: Path, admin) -> Iterator[tuple[LiveServer, LiveServer]]:
    a = LiveServer(data_dir, SMALL, log_name="limited-a").start()
    b = LiveServer(data_dir, SMALL, log_name="limited-b").start()
    yield a, b
    a.stop()
    b.stop()


def client(srv: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def exhaust(call, n: int) -> httpx.Response:  # type: ignore[no-untyped-def]
    for i in range(n):
        r = call(i)
        assert r.status_code < 400, (i, r.status_code, r.text)
        assert int(r.headers["ratelimit-limit"]) == n
        assert int(r.headers["ratelimit-remaining"]) == n - i - 1
        assert "ratelimit-reset" in r.headers
    r = call(n)
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["error"] == "rate_limited" and isinstance(body["retry_after_sec"], int)
    assert r.headers["retry-after"] == str(body["retry_after_sec"])
    assert r.headers["ratelimit-remaining"] == "0"
    return r


def wait_and_retry(resp: httpx.Response, call) -> None:  # type: ignore[no-untyped-def]
    time.sleep(resp.json()["retry_after_sec"] + 0.05)
    r = call(99)
    assert r.status_code < 400, r.text


def test_each_rest_limit_class_answers_429_on_call_n_plus_1(limited, user) -> None:
    srv = limited[0]
    f = user.folder("Lim")
    # read: GET routes share one budget
    c = client(srv, user.token())
    r = exhaust(lambda i: c.get("/api/v1/folders" if i % 2 else "/api/v1/items"), 4)
    wait_and_retry(r, lambda i: c.get("/api/v1/items"))
    # ingest class: ingest + membership add/remove share one budget
    w = client(srv, user.token(write=True))
    item = make_item(user)
    calls = [lambda: w.post("/api/v1/ingest", json={"kind": "text", "text": "limit test note"}),
             lambda: w.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [f]}),
             lambda: w.delete(f"/api/v1/items/{item}/folders/{f}")]
    r = exhaust(lambda i: calls[i % 3]() if i < 3 else calls[0](), 3)
    wait_and_retry(r, lambda i: w.post(f"/api/v1/items/{item}/folders", json={"folder_ids": [f]}))
    # delete class: item delete + folder create
    w2 = client(srv, user.token(write=True))
    victims = [make_item(user) for _ in range(3)]
    r = exhaust(lambda i: w2.delete(f"/api/v1/items/{victims[i]}") if i == 0 else
                w2.post("/api/v1/folders", json={"name": f"n{uuid.uuid4().hex[:6]}"}), 2)
    wait_and_retry(r, lambda i: w2.delete(f"/api/v1/items/{victims[2]}"))
    # bulk class: folder delete + bulk delete
    w3 = client(srv, user.token(write=True))
    r = exhaust(lambda i: w3.post("/api/v1/items/bulk-delete", json={"ids": [str(uuid.uuid4())]}), 1)
    wait_and_retry(r, lambda i: w3.delete(f"/api/v1/folders/{user.folder('Gone' + uuid.uuid4().hex[:4])}"))


def test_an_import_is_one_call_of_the_ingest_budget(limited, user) -> None:
    """However many links a file holds, an import costs one call of the token's hourly ingest budget."""
    w = client(limited[0], user.token(write=True))
    links = b"url\n" + b"".join(f"http://127.0.0.1:9/{n}\n".encode() for n in range(20))
    calls = [lambda: w.post("/api/v1/imports", files={"file": ("links.csv", links)}),
             lambda: w.post("/api/v1/ingest", json={"kind": "text", "text": "one more note"})]
    r = exhaust(lambda i: calls[0]() if i < 2 else calls[1](), 3)
    wait_and_retry(r, lambda i: calls[0]())


def test_limits_are_per_token_and_shared_across_processes(limited, user) -> None:
    a, b = limited
    tok = user.token()
    ca, cb = client(a, tok), client(b, tok)
    for i in range(4):
        assert (ca if i % 2 else cb).get("/api/v1/folders").status_code == 200
    assert ca.get("/api/v1/folders").status_code == 429
    assert cb.get("/api/v1/folders").status_code == 429
    other = client(a, user.token())
    assert other.get("/api/v1/folders").status_code == 200


def test_mcp_limits(limited, user) -> None:
    srv = limited[0]
    tok = user.token(write=True)

    def tool(name: str, args: dict) -> dict:  # type: ignore[type-arg]
        return httpx.post(f"{srv.url}/api/mcp", headers={"Authorization": f"Bearer {tok}"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}}).json()

    for _ in range(2):
        assert "result" in tool("add_to_knowledge", {"text": "mcp limit note"})
    body = tool("add_to_knowledge", {"text": "one too many"})
    assert body["error"]["code"] == -32605
    assert body["error"]["data"]["error"] == "rate_limited" and body["error"]["data"]["retry_after_sec"] >= 1
    # MCP read tools share the REST read budget
    c = client(srv, tok)
    assert c.get("/api/v1/items").status_code == 200
    for _ in range(3):
        assert "result" in tool("list_recent", {})
    assert tool("search_knowledge_base", {"query": "x"})["error"]["data"]["error"] == "rate_limited"
    assert c.get("/api/v1/items").status_code == 429


def test_monthly_write_cap_and_rollover(limited, user, data_dir: Path) -> None:
    srv = limited[0]
    tok = user.token(write=True, write_cap=2)
    c = client(srv, tok)
    assert c.post("/api/v1/ingest", json={"kind": "text", "text": "cap one"}).status_code == 200
    time.sleep(1.1)
    assert c.post("/api/v1/folders", json={"name": f"cap{uuid.uuid4().hex[:5]}"}).status_code == 201
    r = c.post("/api/v1/ingest", json={"kind": "text", "text": "cap three"})
    assert r.status_code == 429
    body = r.json()
    assert body["limit"] == "monthly_writes" and body["error"] == "rate_limited"
    assert abs(body["retry_after_sec"] - seconds_to_month_end()) <= 5
    assert c.get("/api/v1/items").status_code == 200  # reads are not writes
    # a server whose clock is past the month boundary sees a fresh month for the same token
    offset = seconds_to_month_end() + 60
    later = LiveServer(data_dir, {**SMALL, "LEV_CLOCK_OFFSET_SEC": str(offset)}, log_name="nextmonth").start()
    try:
        r = client(later, tok).post("/api/v1/ingest", json={"kind": "text", "text": "next month"})
        assert r.status_code == 200, r.text
    finally:
        later.stop()


def test_rate_limits_off_lifts_hourly_limits(server, user) -> None:
    c = client(server, user.token())
    for _ in range(30):
        r = c.get("/api/v1/folders")
        assert r.status_code == 200 and "ratelimit-limit" not in r.headers


# --- activity log ------------------------------------------------------------------------------------------

def _entries(admin, user_id) -> list:  # type: ignore[no-untyped-def,type-arg]
    deadline = time.monotonic() + 10
    rows: list = []  # type: ignore[type-arg]
    while time.monotonic() < deadline:
        rows = admin.sql("SELECT surface, method, status, ip, user_agent, result_count, latency_ms, query, token_id, "
                         "request_id FROM activity WHERE user_id = :u ORDER BY id", u=user_id)
        if rows:
            return rows
        time.sleep(0.2)
    return rows


def test_activity_entries_for_success_4xx_429_and_mcp(limited, user, admin) -> None:
    srv = limited[0]
    tok = user.token(write=True)
    token_id = admin.sql("SELECT id FROM tokens WHERE user_id = :u", u=user.id)[0][0]
    c = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {tok}", "User-Agent": "lev-test/1.0",
                                                "X-Forwarded-For": "203.0.113.9"}, timeout=60)
    c.post("/api/v1/ingest", json={"kind": "text", "text": "activity log sample about herons"})
    c.get("/api/v1/search", params={"q": "herons", "mode": "keyword"})
    c.get(f"/api/v1/items/{uuid.uuid4()}")
    for _ in range(4):
        last = c.get("/api/v1/folders")
    assert last.status_code == 429
    httpx.post(f"{srv.url}/api/mcp", headers={"Authorization": f"Bearer {tok}"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add_to_knowledge",
                                                                       "arguments": {"text": "heron via mcp"}}})
    time.sleep(1.5)
    rows = _entries(admin, user.id)
    methods = [(r.surface, r.method, r.status) for r in rows]
    assert ("rest", "POST /api/v1/ingest", 200) in methods
    assert ("rest", "GET /api/v1/search", 200) in methods
    assert ("rest", "GET /api/v1/items/{id}", 404) in methods
    assert ("rest", "GET /api/v1/folders", 429) in methods
    assert ("mcp", "tools/call add_to_knowledge", 200) in methods
    search = next(r for r in rows if r.method == "GET /api/v1/search")
    assert search.query == "herons" and search.result_count == 1
    for r in rows:
        assert r.token_id == token_id and r.user_agent in ("lev-test/1.0", "python-httpx/0.28.1")
        assert r.latency_ms >= 0 and r.request_id
    rest = [r for r in rows if r.surface == "rest"]
    assert all(r.ip == "203.0.113.9" for r in rest)  # peer is a trusted proxy here
    dump = repr(admin.sql("SELECT * FROM activity WHERE user_id = :u", u=user.id))
    assert tok not in dump and tok[4:20] not in dump


def test_activity_ip_ignores_forwarded_for_from_untrusted_peer(server, user, admin) -> None:
    c = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {user.token()}",
                                                   "X-Forwarded-For": "198.51.100.7"})
    c.get("/api/v1/folders")
    rows = _entries(admin, user.id)
    assert rows and rows[0].ip == "127.0.0.1"


def test_unauthenticated_requests_logged_without_user(server, admin) -> None:
    marker = f"/api/v1/items/{uuid.uuid4()}"
    httpx.get(server.url + marker)
    deadline = time.monotonic() + 10
    rows: list = []  # type: ignore[type-arg]
    while time.monotonic() < deadline and not rows:
        rows = admin.sql("SELECT user_id, token_id, status, method FROM activity WHERE method = :m",
                         m="GET /api/v1/items/{id}")
        rows = [r for r in rows if r.user_id is None and r.status == 401]
        time.sleep(0.2)
    assert rows and rows[0].token_id is None


def test_activity_endpoint_filters_and_scope(server, user, admin) -> None:
    tok_a = user.token(name="a")
    tok_b = user.token(name="b")
    ids = {r.name: r.id for r in admin.sql("SELECT name, id FROM tokens WHERE user_id = :u", u=user.id)}
    httpx.get(f"{server.url}/api/v1/folders", headers={"Authorization": f"Bearer {tok_a}"})
    httpx.post(f"{server.url}/api/mcp", headers={"Authorization": f"Bearer {tok_b}"},
               json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    time.sleep(1.5)
    c = client(server, tok_a)
    r = c.get("/api/v1/activity")
    assert r.status_code == 200
    body = r.json()
    assert body["total"] >= 2
    got = c.get("/api/v1/activity", params={"token_id": str(ids["b"])}).json()["entries"]
    assert got and all(e["token_id"] == str(ids["b"]) for e in got)
    assert [e["method"] for e in got] == ["ping"]
    assert all(e["surface"] == "mcp" for e in c.get("/api/v1/activity", params={"surface": "mcp"}).json()["entries"])
    f = user.folder("Act")
    r = client(server, user.token(folders=[f])).get("/api/v1/activity")
    assert r.status_code == 403 and r.json()["error"] == "forbidden_scope"
    assert c.get("/api/v1/activity", params={"per_page": 1}).json()["per_page"] == 1


def test_last_used_at_is_recorded(server, user, admin) -> None:
    tok = user.token(name="lu")
    assert admin.sql("SELECT last_used_at FROM tokens WHERE name='lu' AND user_id=:u", u=user.id)[0][0] is None
    httpx.get(f"{server.url}/api/v1/folders", headers={"Authorization": f"Bearer {tok}"})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if admin.sql("SELECT last_used_at FROM tokens WHERE name='lu' AND user_id=:u", u=user.id)[0][0]:
            return
        time.sleep(0.2)
    raise AssertionError("last_used_at was never set")


def test_purge_removes_only_old_rows_and_clear(server, user, admin) -> None:
    from lev.tasks.housekeeping import purge_activity

    admin.sql("INSERT INTO activity (ts, user_id, surface, method, status, latency_ms) VALUES "
              "(now() - interval '91 days', :u, 'rest', 'old', 200, 1), "
              "(now() - interval '89 days', :u, 'rest', 'recent', 200, 1)", u=user.id)
    admin.run_coro(purge_activity(admin.job_ctx()))
    methods = {r.method for r in admin.sql("SELECT method FROM activity WHERE user_id = :u", u=user.id)}
    assert "recent" in methods and "old" not in methods
    import subprocess
    import sys

    from tests.stack import ROOT

    r = subprocess.run([sys.executable, "-m", "lev.cli", "activity", "clear", "--user", user.email],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert admin.sql("SELECT count(*) FROM activity WHERE user_id = :u", u=user.id)[0][0] == 0


def test_entries_survive_clean_shutdown(data_dir: Path, user, admin) -> None:
    srv = LiveServer(data_dir, log_name="flush").start()
    tok = user.token()
    for _ in range(5):
        httpx.get(f"{srv.url}/api/v1/folders", headers={"Authorization": f"Bearer {tok}"})
    srv.stop()
    n = admin.sql("SELECT count(*) FROM activity WHERE user_id = :u AND method = 'GET /api/v1/folders'",
                  u=user.id)[0][0]
    assert n == 5


def test_a_flush_writes_what_was_queued_and_ends_while_entries_keep_arriving(user, admin) -> None:
    """Under steady traffic a flush writes one batch per interval: entries queued while it writes wait for the next
    flush, instead of the flush chasing the queue in small transactions and never ending."""
    import asyncio

    from lev.core import clock
    from lev.ops.activity import ActivityWriter
    from lev.store.db import database

    def entry(method: str) -> dict:
        return {"ts": clock.now(), "user_id": user.id, "token_id": None, "surface": "rest", "method": method,
                "status": 200, "ip": None, "user_agent": None, "result_count": None, "latency_ms": 1.0,
                "query": None, "request_id": None}

    async def go() -> tuple[int, int, int]:
        writer = ActivityWriter(database())
        for _ in range(7):
            writer.record(entry("queued-before"))
        arriving = True
        produced = 0

        async def traffic() -> None:
            nonlocal produced
            while arriving:
                writer.record(entry("queued-during"))
                produced += 1
                await asyncio.sleep(0)

        producer = asyncio.get_running_loop().create_task(traffic())
        try:
            written = await asyncio.wait_for(writer.flush(), 30)
        finally:
            arriving = False
            await producer
        return written, produced, writer.queue.qsize()

    written, produced, left = admin.run_coro(go())
    # The flush took what was queued when it began (the 7, and at most the producer's first entry, which may run
    # before the flush starts); the rest arrived while it wrote and waits for the next flush.
    assert 7 <= written <= 8
    assert left == 7 + produced - written and left > 0
    rows = admin.sql("SELECT count(*) FROM activity WHERE user_id = :u", u=user.id)
    assert rows[0][0] == written


def test_a_search_on_the_web_pages_is_in_the_activity_log(server) -> None:  # type: ignore[no-untyped-def]
    """The Activity page lists what it says it lists: searches made on the pages too (surface web, query, count)."""
    from tests.auth.test_account import Browser

    b = Browser(server.url)
    assert b.signup().status_code == 201
    assert b.client.get("/", params={"q": "lighthouse keepers", "mode": "keyword"}).status_code == 200
    deadline = time.monotonic() + 60
    while True:
        found = [e for e in b.call("GET", "/api/account/activity").json()["entries"]
                 if e["query"] == "lighthouse keepers"]
        if found:
            break
        assert time.monotonic() < deadline, "the web search never reached the activity log"
        time.sleep(0.3)
    assert found[0]["surface"] == "web" and found[0]["result_count"] == 0 and found[0]["method"] == "GET / search"
    assert "every search on its pages" in b.client.get("/activity").text
