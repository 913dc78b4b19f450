"""An adversarial pass against a live Lev on its own embedded stack at default settings (but for the hourly rate
limits, off so that the pass tests the requests and not the limiter): racing writes, hostile bodies (REST and
MCP), chunked bodies, scope probes with folder tokens, URL ingests aimed at this machine (SSRF), and a kill -9 of
Lev, PostgreSQL and Redis in the middle of queued work.

Prints the counts the issue asks for: requests, HTTP 500s and 503s (any other 5xx too), MCP internal errors,
scope leaks, SSRF connections, tokens left alive with an empty scope, stuck items (still processing a while after
the restart) and lost items (acknowledged, then missing). Run: `.venv/bin/python -m bench.adversarial`
(ADVERSARIAL_ROUNDS sets the race rounds, 150 by default: about 2,250 requests in all).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tests.api.test_hostile_input import HOSTILE
from tests.fixtures_imports import chromium_bookmarks
from tests.ops.test_crash import Stack, big_text
from tests.transcribe_stub import TranscribeStub

STATS: Counter[str] = Counter()
STATUSES: dict[str, Counter[int]] = {}  # answers by section, to show the probes reached the code they test
SECTION = ["setup"]


def hit(c: httpx.Client, method: str, path: str, **kw: Any) -> httpx.Response:
    r = c.request(method, path, **kw)
    STATS["requests"] += 1
    STATUSES.setdefault(SECTION[0], Counter())[r.status_code] += 1
    if r.status_code >= 500:
        STATS["5xx"] += 1
        STATS[f"http_{r.status_code}"] += 1
        print("5xx", method, path, r.status_code, r.text[:200])
    if path == "/api/mcp" and r.status_code == 200 and r.content:
        body = r.json()
        if isinstance(body, dict) and body.get("error", {}).get("code") == -32603:
            STATS["mcp_internal"] += 1
            print("-32603", r.text[:200])
    return r


def client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120)


def races(url: str, stack: Stack, email: str, whole: str, rounds: int = 25) -> None:
    SECTION[0] = "races"
    c = client(url, whole)

    def go(call: tuple[str, str, Any]) -> None:
        with client(url, whole) as cc:
            hit(cc, call[0], call[1], json=call[2])

    with ThreadPoolExecutor(6) as pool:
        for n in range(rounds):
            f = hit(c, "POST", "/api/v1/folders", json={"name": f"f{n}-{uuid.uuid4().hex[:6]}"}).json()["id"]
            g = hit(c, "POST", "/api/v1/folders", json={"name": f"g{n}-{uuid.uuid4().hex[:6]}"}).json()["id"]
            item = hit(c, "POST", "/api/v1/ingest", json={"kind": "text", "text": f"race note {n}",
                                                          "folder_id": g, "auto_transform": False}).json()
            iid = item["user_item_id"]
            two = stack.token(email, f"two{n}", write=False, folders=[f, g])
            calls = [("POST", f"/api/v1/items/{iid}/folders", {"folder_ids": [f, g]}),
                     ("DELETE", f"/api/v1/items/{iid}", None),
                     ("DELETE", f"/api/v1/folders/{f}?cascade_items=true", None),
                     ("DELETE", f"/api/v1/items/{iid}/folders/{g}", None),
                     ("DELETE", f"/api/v1/folders/{g}", None),
                     ("POST", "/api/v1/ingest", {"kind": "text", "text": "into a dying folder", "folder_id": f})]
            list(pool.map(go, calls))
            r = hit(client(url, two), "GET", "/api/v1/folders")
            if r.status_code != 401:
                STATS["token_left_alive"] += 1


def hostile(url: str, token: str, folder: str, item: str) -> None:
    SECTION[0] = "hostile"
    c = client(url, token)
    targets = [("/api/v1/folders", {"name": "x"}), ("/api/v1/ingest", {"kind": "text", "text": "x", "title": "t"}),
               ("/api/v1/items/bulk-delete", {"ids": [item]}),
               (f"/api/v1/items/{item}/folders", {"folder_ids": [folder]})]
    for fragment in HOSTILE:
        for path, template in targets:
            for field in template:
                body = json.dumps({**template, field: "__h__"}).replace('"__h__"', fragment)
                r = hit(c, "POST", path, content=body, headers={"Content-Type": "application/json"})
                if r.status_code not in (400, 413):
                    STATS["hostile_not_refused"] += 1
        msg = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_knowledge_base",' \
              '"arguments":{"query":' + fragment + "}}}"
        hit(c, "POST", "/api/mcp", content=msg, headers={"Content-Type": "application/json",
                                                         "Accept": "application/json, text/event-stream"})
    chunked = (p for p in [b'{"kind": "text", ', b'"text": "sent in chunks"}'])
    if hit(c, "POST", "/api/v1/ingest", content=chunked).status_code != 200:
        STATS["chunked_refused"] += 1


MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def mcp(c: httpx.Client, tool: str, arguments: dict[str, Any]) -> httpx.Response:
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return hit(c, "POST", "/api/mcp", json=msg, headers=MCP_HEADERS)


def scope(url: str, stack: Stack, email: str, whole: str, reps: int = 8) -> None:
    """Folder tokens probe what lies outside their folders, on every read and write route; a leak is a 2xx
    answer that names an outside item, folder or text, or an outside row changed afterwards."""
    SECTION[0] = "scope"
    c = client(url, whole)
    a = hit(c, "POST", "/api/v1/folders", json={"name": "scope-a"}).json()["id"]
    b = hit(c, "POST", "/api/v1/folders", json={"name": "scope-b"}).json()["id"]
    spare = hit(c, "POST", "/api/v1/folders", json={"name": "scope-c"}).json()["id"]
    inside = hit(c, "POST", "/api/v1/ingest", json={"kind": "text", "text": "zqxinside visible note",
                                                    "folder_id": a}).json()["user_item_id"]
    tokens = {"one_read": stack.token(email, "scope-one", write=False, folders=[a]),
              "two_write": stack.token(email, "scope-two", write=True, folders=[a, spare])}
    for rep in range(reps):
        secret = f"zqxsecret{rep}"
        b_item = hit(c, "POST", "/api/v1/ingest", json={"kind": "text", "text": f"{secret} outside note",
                                                        "title": f"{secret} b", "folder_id": b}).json()["user_item_id"]
        u_item = hit(c, "POST", "/api/v1/ingest", json={"kind": "text", "text": f"{secret} unfiled note",
                                                        "title": f"{secret} u"}).json()["user_item_id"]
        marks = [secret, b_item, u_item, b]
        for name, token in tokens.items():
            t = client(url, token)
            reads = [("GET", "/api/v1/items", None), ("GET", f"/api/v1/items?folder_id={b}", None),
                     ("GET", f"/api/v1/items/{b_item}", None), ("GET", f"/api/v1/items/{u_item}", None),
                     ("GET", f"/api/v1/items/{b_item}/similar", None), ("GET", f"/api/v1/items/{b_item}/media", None),
                     ("GET", f"/api/v1/items/{inside}/similar?limit=50", None),
                     ("GET", f"/api/v1/search?q={secret}", None), ("GET", f"/api/v1/search?q={secret}&mode=keyword",
                                                                  None),
                     ("GET", f"/api/v1/search?q={secret}&folder_id={b}", None), ("GET", "/api/v1/folders", None),
                     ("GET", "/api/v1/export", None), ("GET", "/api/v1/imports", None),
                     ("GET", "/api/v1/activity", None)]
            writes = [("PATCH", f"/api/v1/items/{b_item}", {"title": "taken"}),
                      ("POST", f"/api/v1/items/{b_item}/folders", {"folder_ids": [spare]}),
                      ("POST", f"/api/v1/items/{u_item}/folders", {"folder_ids": [a]}),
                      ("DELETE", f"/api/v1/items/{b_item}/folders/{b}", None),
                      ("POST", "/api/v1/items/bulk-delete", {"ids": [b_item, u_item]}),
                      ("PATCH", f"/api/v1/folders/{b}", {"name": "taken"}),
                      ("POST", "/api/v1/ingest", {"kind": "text", "text": "x", "folder_id": b}),
                      ("DELETE", f"/api/v1/items/{u_item}", None), ("DELETE", f"/api/v1/folders/{b}", None)]
            for method, path, body in reads + writes:
                r = hit(t, method, path, json=body)
                named = r.json().get("deleted", []) if path.endswith("bulk-delete") and r.status_code < 300 else r.text
                if r.status_code < 300 and any(m in named for m in marks):
                    STATS["scope_leaks"] += 1
                    print("scope leak", name, method, path, r.status_code, r.text[:200])
            for tool, args in [("search_knowledge_base", {"query": secret}), ("get_item", {"item_id": b_item}),
                               ("get_item", {"item_id": u_item}), ("list_recent", {"limit": 50}),
                               ("add_to_knowledge", {"text": "x", "folder_id": b})]:
                r = mcp(t, tool, args)
                if r.status_code == 200 and "error" not in r.json() and not r.json()["result"].get("isError") \
                        and any(m in r.text for m in marks):
                    STATS["scope_leaks"] += 1
                    print("scope leak", name, "mcp", tool, r.text[:200])
        after = [hit(c, "GET", f"/api/v1/items/{i}") for i in (b_item, u_item)]
        if any(r.status_code != 200 for r in after) or after[0].json()["title"] != f"{secret} b" \
                or after[1].json()["title"] != f"{secret} u":
            STATS["scope_leaks"] += 1
            print("scope leak: an outside item changed", [r.text[:200] for r in after])
        listed = hit(c, "GET", f"/api/v1/items?folder_id={b}&per_page=100").json()
        if b_item not in json.dumps(listed):
            STATS["scope_leaks"] += 1
            print("scope leak: an outside item left its folder")
    if b not in hit(c, "GET", "/api/v1/folders").text:
        STATS["scope_leaks"] += 1
        print("scope leak: the outside folder is gone")


class Listener:
    """Counts TCP connections to a port on 127.0.0.1 (and ::1): any is an SSRF connection."""

    def __init__(self) -> None:
        self.count = 0
        self.socks = [socket.create_server(("127.0.0.1", 0))]
        self.port = self.socks[0].getsockname()[1]
        try:
            self.socks.append(socket.create_server(("::1", self.port), family=socket.AF_INET6))
        except OSError:
            pass
        for s in self.socks:
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()

    def serve(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            self.count += 1
            print("SSRF connection", conn.getsockname())
            conn.close()

    def close(self) -> None:
        for s in self.socks:
            s.close()


def ssrf(url: str, token: str) -> None:
    """URL ingests aimed at this machine in every spelling, over REST, MCP, an import and an OAuth client ID
    metadata document; with default settings none may connect."""
    SECTION[0] = "ssrf"
    listener = Listener()
    p = listener.port
    hosts = ["127.0.0.1", "localhost", "LOCALHOST", "localhost.", "127.1", "127.0.1", "0x7f000001", "2130706433",
             "017700000001", "0x7f.0.0.1", "0177.0.0.1", "0.0.0.0", "0", "[::1]", "[::]", "[::ffff:127.0.0.1]",
             "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]", "user@127.0.0.1", "127.0.0.1%2f", "127.0.0.1."]
    urls = [f"http://{h}:{p}/page" for h in hosts] + [f"https://127.0.0.1:{p}/page", f"http://127.0.0.1:{p}/x.mp3",
                                                      f"http://127.0.0.1:{p}/x.pdf"]
    c = client(url, token)
    for u in urls:
        hit(c, "POST", "/api/v1/ingest", json={"kind": "url", "url": u, "auto_transform": False})
        mcp(c, "add_to_knowledge", {"url": u, "auto_transform": False})
    r = hit(c, "POST", "/api/v1/imports", files={"file": ("b.html", chromium_bookmarks(
        [("folder", "SSRF", [("link", f"L{n}", u) for n, u in enumerate(urls)])]))})
    if r.status_code == 202:
        deadline = time.monotonic() + 120
        while hit(c, "GET", f"/api/v1/imports/{r.json()['id']}").json()["status"] != "done" \
                and time.monotonic() < deadline:
            time.sleep(1)
    anon = httpx.Client(base_url=url, timeout=30)
    for u in [f"https://127.0.0.1:{p}/client.json", f"https://localhost:{p}/client.json",
              f"https://[::1]:{p}/client.json", f"https://2130706433:{p}/client.json"]:
        hit(anon, "GET", "/oauth/authorize", params={
            "client_id": u, "redirect_uri": "http://127.0.0.1:9/cb", "response_type": "code", "state": "s",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256"})
        hit(anon, "POST", "/oauth/token", data={"grant_type": "authorization_code", "client_id": u, "code": "x",
                                                "redirect_uri": "http://127.0.0.1:9/cb", "code_verifier": "v" * 43})
    time.sleep(2)  # a connection made by a job still running would show by now
    STATS["ssrf_connections"] += listener.count
    listener.close()


def main() -> None:
    started = time.monotonic()
    stub = TranscribeStub()
    stack = Stack(stub)
    stack.env.pop("LEV_ALLOW_PRIVATE_URLS", None)  # the default: no private addresses
    STATS.update({"requests": 0, "5xx": 0, "http_500": 0, "http_503": 0, "mcp_internal": 0, "scope_leaks": 0,
                  "ssrf_connections": 0, "token_left_alive": 0, "hostile_not_refused": 0, "chunked_refused": 0})
    try:
        srv = stack.start()
        email = "adversary@example.com"
        whole = stack.token(email, "whole")
        c = client(srv.url, whole)
        folder = hit(c, "POST", "/api/v1/folders", json={"name": "keep"}).json()["id"]
        item = hit(c, "POST", "/api/v1/ingest", json={"kind": "text", "text": "kept", "folder_id": folder}).json()
        races(srv.url, stack, email, whole, rounds=int(os.environ.get("ADVERSARIAL_ROUNDS", "150")))
        hostile(srv.url, whole, folder, item["user_item_id"])
        scope(srv.url, stack, email, whole)
        ssrf(srv.url, whole)
        acknowledged = []
        for n in range(4):
            r = hit(c, "POST", "/api/v1/ingest", json={"kind": "text", "text": big_text(f"crash{n}"),
                                                       "auto_transform": False})
            if r.status_code == 200:
                acknowledged.append(r.json()["user_item_id"])
        SECTION[0] = "crash"
        stack.kill_all(lose_redis=True)
        srv = stack.start()
        c = client(srv.url, whole)
        deadline = time.monotonic() + 240
        states: dict[str, Any] = {}
        while time.monotonic() < deadline:
            states = {i: hit(c, "GET", f"/api/v1/items/{i}") for i in acknowledged}
            if all(r.status_code == 200 and r.json()["status"] == "ready" for r in states.values()):
                break
            time.sleep(2)
        STATS["lost"] = sum(r.status_code == 404 for r in states.values())
        STATS["stuck"] = sum(r.status_code == 200 and r.json()["status"] != "ready" for r in states.values())
        STATS["acknowledged_before_crash"] = len(acknowledged)
    finally:
        for log in stack.dir.glob("life*.log"):
            (Path("/tmp") / f"adversarial-{log.name}").write_bytes(log.read_bytes())
        stack.stop()
        stub.close()
    print(json.dumps({name: dict(sorted(counts.items())) for name, counts in STATUSES.items()}))
    print(json.dumps({**STATS, "seconds": round(time.monotonic() - started)}))


if __name__ == "__main__":
    main()
