"""An adversarial pass against a live Lev on its own embedded stack: racing writes, hostile bodies (REST and
MCP), chunked bodies, and a kill -9 of Lev, PostgreSQL and Redis in the middle of queued work.

Prints the counts the issue asks for: requests, 5xx answers, stuck items (still processing a while after the
restart) and lost items (acknowledged, then missing). Run: `.venv/bin/python -m bench.adversarial`.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tests.test_crash import Stack, big_text
from tests.test_hostile_input import HOSTILE
from tests.transcribe_stub import TranscribeStub

STATS: Counter[str] = Counter()


def hit(c: httpx.Client, method: str, path: str, **kw: Any) -> httpx.Response:
    r = c.request(method, path, **kw)
    STATS["requests"] += 1
    if r.status_code >= 500:
        STATS["5xx"] += 1
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
            two = stack.cli("token", "create", "--user", email, "--name", f"two{n}", "--folder", f, "--folder", g)
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


def main() -> None:
    started = time.monotonic()
    stub = TranscribeStub()
    stack = Stack(stub)
    try:
        srv = stack.start()
        email = "adversary@example.com"
        stack.cli("user", "create", email, "--tier", "pro")
        whole = stack.cli("token", "create", "--user", email, "--name", "whole", "--write", "--write-cap", "0")
        c = client(srv.url, whole)
        folder = hit(c, "POST", "/api/v1/folders", json={"name": "keep"}).json()["id"]
        item = hit(c, "POST", "/api/v1/ingest", json={"kind": "text", "text": "kept", "folder_id": folder}).json()
        races(srv.url, stack, email, whole, rounds=int(os.environ.get("ADVERSARIAL_ROUNDS", "25")))
        hostile(srv.url, whole, folder, item["user_item_id"])
        acknowledged = []
        for n in range(4):
            r = hit(c, "POST", "/api/v1/ingest", json={"kind": "text", "text": big_text(f"crash{n}"),
                                                       "auto_transform": False})
            if r.status_code == 200:
                acknowledged.append(r.json()["user_item_id"])
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
    print(json.dumps({**STATS, "seconds": round(time.monotonic() - started)}))


if __name__ == "__main__":
    main()
