"""Issue 19 tried as a new user would, against `lev serve --port 8125` on a fresh data dir: import a Chromium-format
bookmarks file (nested folders, 200 links served by a loopback site) and watch its progress, see the folders,
search a transcript and open the hit's url at its second in Chromium, time similar items, introspect a
one-folder read token. Prints the figures as Markdown.

    .venv/bin/python -m bench.features_trial [--port 8125] [--links 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import commit, fmt_pct, machine, pct
from tests import fixtures_media as fm
from tests.api.test_timestamps import lecture
from tests.fixtures_imports import chromium_bookmarks
from tests.ingest.test_uploads import upload, wait_item
from tests.sites import TOPICS, Site
from tests.transcribe_stub import TranscribeStub

ROOT = Path(__file__).resolve().parent.parent
LEV = [sys.executable, "-m", "lev.cli"]


def bookmarks(site: Site, links: int) -> bytes:
    """A realistic bookmark bar: topic folders two and three levels deep, a few loose links, some duplicates."""
    urls = [(f"{site.url}/a/{n}", n) for n in range(links)]
    groups: dict[str, list[Any]] = {}
    for url, n in urls[10:]:
        topic = TOPICS[n % len(TOPICS)]
        shelf = "Science" if n % 3 == 0 else "Hobbies" if n % 3 == 1 else "Work"
        groups.setdefault(shelf, []).append((topic, ("link", f"Notes on {topic}, part {n}", url)))
    bar: list[Any] = [("link", f"Loose link {n}", url) for url, n in urls[:6]]
    for shelf, entries in groups.items():
        topics: dict[str, list[Any]] = {}
        for topic, link in entries:
            topics.setdefault(topic.title(), []).append(link)
        children: list[Any] = [("folder", name, items) for name, items in sorted(topics.items())]
        if shelf == "Work":
            children = [("folder", "Projects", [("folder", "2026", children[:3])]), *children[3:]]
        bar.append(("folder", shelf, children))
    bar.append(("folder", "Read later", [("link", "again", urls[15][0]), ("link", "and again", urls[40][0])]))
    other = [("link", f"Other {n}", url) for url, n in urls[6:10]]
    return chromium_bookmarks(bar, other)


def run(port: int, links: int) -> None:
    data = Path(tempfile.mkdtemp(prefix="levtrial-", dir="/tmp"))
    site, stub = Site(), TranscribeStub()
    env = {**os.environ, "LEV_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1", "LEV_ALLOW_PRIVATE_URLS": "true",
           "LEV_TRANSCRIBE_URL": stub.url}
    log = open(data / "serve.log", "wb")
    server = subprocess.Popen([*LEV, "serve", "--port", str(port)], env=env, cwd=ROOT, stdout=log,
                              stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    out: list[str] = []
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "lev serve did not start"
            time.sleep(0.5)

        def cli(*args: str) -> str:
            return subprocess.run([*LEV, *args], env=env, cwd=ROOT, check=True, capture_output=True, text=True,
                                  timeout=120).stdout.strip()

        cli("user", "create", "trial@example.com", "--tier", "pro")
        token = cli("token", "create", "--user", "trial@example.com", "--name", "trial", "--write", "--no-kb-only")
        c = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120)

        # 1. the import, watched
        file = data / "bookmarks_11_24_26.html"
        file.write_bytes(bookmarks(site, links))
        started = time.monotonic()
        r = c.post("/api/v1/imports", files={"file": (file.name, file.read_bytes(), "text/html")})
        assert r.status_code == 202, r.text
        answered = time.monotonic() - started
        imp = r.json()
        samples = []
        while imp["status"] != "done":
            time.sleep(0.5)
            imp = c.get(f"/api/v1/imports/{imp['id']}").json()
            samples.append((round(time.monotonic() - started, 1), imp["done"] + imp["failed"]))
        took = time.monotonic() - started
        folders = c.get("/api/v1/folders").json()["folders"]
        out += ["### Import of a Chromium bookmarks file", "",
                f"- File: {file.stat().st_size} bytes, {links + 2} bookmarks of {imp['total']} distinct links (2 saved "
                f"twice), {len(imp['folders'])} folders up to 4 levels deep; answered 202 in {answered * 1000:.0f} ms.",
                f"- All {imp['total']} links ingested (fetched, extracted, chunked, embedded) in **{took:.1f} s** "
                f"({imp['total'] / took:.1f} links/s, `LEV_IMPORT_CONCURRENCY` 4): done {imp['done']}, failed "
                f"{imp['failed']}.",
                "- Progress seen while polling every 0.5 s (s: links finished): "
                + ", ".join(f"{t}: {n}" for t, n in samples[:: max(1, len(samples) // 8)]),
                f"- Folders afterwards ({len(folders)}): "
                + "; ".join(f"{f['name']} ({f['item_count']})" for f in folders[:8]) + "; …", ""]
        again_start = time.monotonic()
        r = c.post("/api/v1/imports", files={"file": (file.name, file.read_bytes(), "text/html")})
        again = r.json()
        while again["status"] != "done":
            time.sleep(0.2)
            again = c.get(f"/api/v1/imports/{again['id']}").json()
        out += [f"- The same file again: {again['already_present']} of {again['total']} already present, "
                f"{again['folders_created']} folders created, {time.monotonic() - again_start:.1f} s; items in "
                f"the library: {c.get('/api/v1/items', params={'per_page': 1}).json()['total']}.", ""]

        # 2. a transcript hit opened at its second
        talk = lecture()
        stub.segments("keepers-lecture.wav", [(a / 10, b / 10, t) for a, b, t in talk])
        wav = fm.make_wav(data / "keepers-lecture.wav", seconds=31.0, rate=8000)
        _, r = upload(c, wav, "audio/wav", auto_transform=False, title="The keepers' lecture")
        item = wait_item(c, r.json()["user_item_id"], lambda i: i["status"] != "processing", timeout=120)
        hit = c.get("/api/v1/search", params={"q": "radio beacons", "limit": 3}).json()["results"][0]
        second = at = None
        if hit["item_id"] == item["id"]:
            from playwright.sync_api import sync_playwright

            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--headless", "--no-sandbox", "--disable-gpu"])
                page = browser.new_context(extra_http_headers={"Authorization": f"Bearer {token}"}).new_page()
                page.goto(hit["url"])
                page.wait_for_function("() => { const m = document.querySelector('video, audio');"
                                       " return m && m.readyState >= 1; }")
                at = page.evaluate("document.querySelector('video, audio').currentTime")
                browser.close()
            second = int(hit["url"].rsplit("=", 1)[1])
        out += ["### A transcript hit opened at its second", "",
                f"- Hybrid search \"radio beacons\" over the 200 pages and a 31 s recording: the top hit is the "
                f"recording's chunk at {hit.get('start_sec')}–{hit.get('end_sec')} s, "
                f"url `{hit['url'].replace(base, '')}`.",
                f"- Chromium (bearer header, no session) opened that url: the player stood at {at} s "
                f"(asked: {second}).",
                ""]

        # 3. similar items latency
        listing = c.get("/api/v1/items", params={"per_page": 100}).json()
        items, total = listing["items"], listing["total"]
        ids = [i["id"] for i in items if i["status"] == "ready"][:50]
        for i in ids[:5]:
            c.get(f"/api/v1/items/{i}/similar")
        times = []
        first: dict[str, Any] = {}
        for n in range(200):
            t0 = time.perf_counter()
            r = c.get(f"/api/v1/items/{ids[n % len(ids)]}/similar", params={"limit": 10})
            times.append((time.perf_counter() - t0) * 1000)
            assert r.status_code == 200, r.text
            first = first or r.json()
        p = pct(times)
        out += ["### Similar items", "",
                f"- `GET /api/v1/items/{{id}}/similar?limit=10`, 200 sequential calls over 50 items of the "
                f"{total} items (whole-library token), client-side wall time on loopback: "
                f"p50 / p95 / p99 **{fmt_pct(p)} ms**.",
                f"- Example: for \"{next(i['title'] for i in items if i['id'] == first['item_id'])}\" the first "
                f"three: " + "; ".join(f"{h['title']} ({h['similarity']:.2f})" for h in first["results"][:3]), ""]

        # 4. a one-folder read token explains itself
        folder = next(f for f in folders if f["name"].endswith("/ Glaciers"))
        scoped = cli("token", "create", "--user", "trial@example.com", "--name", "glacier agent", "--folder",
                     folder["id"])
        me = httpx.get(f"{base}/api/v1/token", headers={"Authorization": f"Bearer {scoped}"}).json()
        out += ["### A one-folder read token introspected", "", "```json",
                json.dumps({k: me[k] for k in ("name", "capabilities", "whole_library", "folders", "kb_only",
                                               "monthly_writes", "hourly")}, indent=1), "```", ""]
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
        site.close()
        stub.close()
        if not os.environ.get("LEV_BENCH_KEEP"):
            shutil.rmtree(data, ignore_errors=True)
    print(f"Machine: {machine()}. Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
          f"Commit: {commit()}. Load average at the end: {' / '.join(f'{x:.1f}' for x in os.getloadavg())}.\n")
    print("\n".join(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8125)
    parser.add_argument("--links", type=int, default=200)
    args = parser.parse_args()
    run(args.port, args.links)


if __name__ == "__main__":
    main()
