"""Issue 42: what highlights cost. This commit against older ones, side by side on one database in the same run
(old code on the new, additive schema):

- search at c=1 for a user with 20,000 chunks and 300 highlights with notes, every mode, against
  `LEV_BENCH_OLD_SEARCH` (main just before highlights joined search: the new code runs one more statement per
  search, over the user's highlights);
- the item page of a 2 MB item against `LEV_BENCH_OLD` (main before issue 42: its page showed the first 20,000
  characters; the new one a reader part of about 30,000 characters in runs, with the item's highlights marked),
  and the new page opened at a highlight near the item's end.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from typing import Any

import httpx
import numpy as np

from bench import busy
from bench.busy import QUIET, base_corpus, both_servers, c1_alternating, cpu_gauge, grow, loadavg, reindex, stop_all
from bench.common import SCIFACT, cleanup, fmt_pct, pct, start_lev
from bench.latency import db_url
from bench.scifact import load_data

OLD = os.environ.get("LEV_BENCH_OLD", "91ecd20")  # main before issue 42
OLD_SEARCH = os.environ.get("LEV_BENCH_OLD_SEARCH", "92dd0ef")  # main before highlights joined search
CHUNKS, HIGHLIGHTS, C1, PAGES = 20_000, 300, 150, 40
LOG_LINE = "Ship's log, a calm day at sea with nothing to report but the wind and the gulls. " * 3


def _highlight_some(url: str, token: str, lev: Any, rng: random.Random) -> int:
    """HIGHLIGHTS highlights with notes on random items of the user, through REST (each embedded by the server)."""
    rows = lev.admin.sql("SELECT ui.id, c.text FROM user_items ui JOIN contents c ON c.id = ui.content_id "
                         "WHERE ui.user_id = :u ORDER BY random() LIMIT :n", u=lev.user_id, n=HIGHLIGHTS)
    made = 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
        for item_id, text in rows:
            words = text.split()
            if len(words) < 12:
                continue
            at = rng.randrange(0, len(words) - 8)
            r = c.post(f"/api/v1/items/{item_id}/highlights",
                       json={"text": " ".join(words[at:at + 8]), "note": f"note {made}: worth rereading"})
            made += r.status_code == 201
    return made


def _page_times(servers: dict[str, Any], cookies: dict[str, str], paths: dict[str, str]) -> dict[str, list[float]]:
    """GET each side's path PAGES times, sides in turn (order flipped each round), one keep-alive client each."""
    out: dict[str, list[float]] = {k: [] for k in paths}
    clients = {k: httpx.Client(base_url=servers[k.split(":")[0]].url, cookies=cookies, timeout=60) for k in paths}
    try:
        for k in paths:  # warm-up
            clients[k].get(paths[k])
        for i in range(PAGES):
            for k in (list(paths) if i % 2 == 0 else list(reversed(list(paths)))):
                t = time.perf_counter()
                r = clients[k].get(paths[k])
                out[k].append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, (k, r.status_code)
    finally:
        for c in clients.values():
            c.close()
    return out


def main() -> str:
    import psycopg
    from pgvector.psycopg import register_vector

    out: list[str] = [f"### Highlights: this commit vs {OLD_SEARCH} (search) and {OLD} (the item page)", ""]
    lines = out.append
    lines(f"Old code: `git archive` of {OLD_SEARCH} (main just before highlights joined search) and of {OLD} (main "
          "before issue 42), each side by side with the new code on one database (the new schema is additive). "
          "The machine's 2 cores are shared with other sessions' test runs: each comparison alternates "
          "old and new request by request, with the load average (1/5/15 min) and a CPU gauge (ms, best of 3).")
    lines("")
    corpus, queries, qrels = load_data(SCIFACT)
    test = [queries[q] for q in qrels["test"] if q in queries][:C1]
    base = base_corpus()
    lev = start_lev(QUIET)
    rng, nrng = random.Random(42), np.random.default_rng(42)
    try:
        with psycopg.connect(db_url(), autocommit=True) as conn:
            register_vector(conn)
            grow(conn, base, [(lev.user_id, CHUNKS)], rng, nrng)
            reindex(conn)
            n_chunks = conn.execute("SELECT count(*) FROM chunks WHERE content_id IN (SELECT content_id FROM "
                                    "user_items WHERE user_id = %s)", (lev.user_id,)).fetchone()[0]  # type: ignore[index]
        made = _highlight_some(lev.url, lev.token, lev, rng)
        busy.OLD = OLD_SEARCH
        servers = both_servers(lev)
        try:
            before, gauge = loadavg(), cpu_gauge()
            search = {m: c1_alternating(servers, lev.token, test, m) for m in ("hybrid", "keyword", "semantic")}
        finally:
            stop_all(servers)
        busy.OLD = OLD
        servers = both_servers(lev)
        try:
            # a reader with a browser session and a 2 MB item with a highlight near its end
            browser = httpx.Client(base_url=servers["new"].url, timeout=60)
            email = f"bench{uuid.uuid4().hex[:8]}@example.com"
            signed = browser.post("/api/account/signup", json={"email": email, "password": "bench password 42"})
            assert signed.status_code == 201, signed.text
            uid = lev.admin.sql("SELECT id FROM users WHERE email = :e", e=email)[0][0]
            text = "\n".join(f"Entry {n}. {LOG_LINE}" for n in range(8200))
            content_id, item_id = str(uuid.uuid4()), str(uuid.uuid4())
            lev.admin.sql("INSERT INTO contents (id, kind, title, text) VALUES (:id, 'text', 'Long log', :x)",
                          id=content_id, x=text)
            lev.admin.sql("INSERT INTO user_items (id, user_id, content_id, kind, title, in_kb, archived) "
                          "VALUES (:id, :u, :c, 'text', 'Long log', true, false)", id=item_id, u=uid, c=content_id)
            csrf = signed.json()["csrf_token"]
            h = browser.post(f"/api/v1/items/{item_id}/highlights", headers={"X-CSRF-Token": csrf},
                             json={"text": "Entry 8100. Ship's log", "note": "near the end"}).json()
            cookies = dict(browser.cookies)
            sizes = {k: len(httpx.get(f"{servers[k].url}/items/{item_id}", cookies=cookies, timeout=60).content)
                     for k in ("old", "new")}
            pages = _page_times(servers, cookies, {"old": f"/items/{item_id}", "new": f"/items/{item_id}",
                                                    "new:highlight": f"/items/{item_id}?highlight={h['id']}"})
            after = loadavg()
        finally:
            stop_all(servers)
    finally:
        cleanup(lev)

    lines(f"#### Search at c=1: {n_chunks:,} chunks and {made} highlights with notes (one user), "
          f"{len(test)} SciFact test queries per mode")
    lines("")
    lines("| mode | old p50 / p95 / p99 ms | new p50 / p95 / p99 ms | new/old p50 |")
    lines("| --- | --- | --- | --- |")
    for mode, r in search.items():
        lines(f"| {mode} | {fmt_pct(r['old'])} | {fmt_pct(r['new'])} | {r['new']['p50'] / r['old']['p50']:.2f} |")
    lines("")
    lines("#### The item page of a 2 MB item (8,200 lines, 2,046,000 characters), c=1")
    lines("")
    lines("| page | p50 / p95 / p99 ms | bytes |")
    lines("| --- | --- | --- |")
    lines(f"| old: the first 20,000 characters | {fmt_pct(pct(pages['old']))} | {sizes['old']:,} |")
    lines(f"| new: reader part 1 (about 30,000 characters, in runs) | {fmt_pct(pct(pages['new']))} | "
          f"{sizes['new']:,} |")
    lines(f"| new: opened at a highlight near the end (`?highlight=`) | {fmt_pct(pct(pages['new:highlight']))} | |")
    lines("")
    lines(f"Load average before → after: {before} → {after}; CPU gauge {gauge:.0f} ms.")
    return "\n".join(out)
