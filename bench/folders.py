"""Issue 48 items 4-6: whole folders. One fresh stack (worker inline), one user A importing and syncing folders,
another user B saving notes, `/healthz` asked every 20 ms throughout.

Phases: quiet (B's notes alone: the baseline); hostile archives (A posts, one after another, 100,000 tiny files, a
ZIP bomb of zeros, one declaring 2.25 GB, a truncated archive, one with a `../` path, and a 15,000-entry archive of
which the server reads the directory, its files then not imported); a vault (A imports a ZIP of `VAULT` Markdown
notes in folders, the worker ingesting them, B's notes beside); the vault again (nothing to add); `lev sync` of the
same notes into another folder, then again unchanged (its writes counted). B saves a one-sentence note every 2 s
and measures its time to ready, the promise of the fair share (lev/tasks/fairshare.py, the embedding turns of
issue 47): within 5 s whatever A does. Figures: /healthz p50/p95/p99 and max, B's note-to-ready p50 and max, A's
times.
"""

from __future__ import annotations

import io
import shutil
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import cleanup, fmt_pct, pct, start_lev
from bench.unfair import prose
from lev.sync import command as sync_command
from lev.sync.client import Client
from tests.fixtures_archives import declared_sizes, tiny_files, zeros_bomb, zip_of
from tests.stack import new_user

VAULT = 300
TIMEOUT = 1800.0
QUIET_SEC = 30.0


def vault(n: int) -> dict[str, str]:
    folders = ["Projects", "Projects/Active", "Areas/Health", "Areas/Home", "Reading", "Daily"]
    return {f"Vault/{folders[i % len(folders)]}/note-{i}.md":
            f"---\ntitle: Note {i}\ntags: [bench]\n---\n# Note {i}\n\n{prose(600 + (i % 7) * 200)}\n"
            for i in range(n)}


def _ready_ms(c: httpx.Client, n: int) -> float:
    started = time.perf_counter()
    r = c.post("/api/v1/ingest", json={"kind": "text", "title": f"B {n}", "text": f"Tides follow the moon {n}."})
    if r.status_code != 200:
        return float("nan")
    item = r.json()["user_item_id"]
    while r.json().get("status") != "ready" and time.perf_counter() - started < TIMEOUT:
        time.sleep(0.1)
        r = c.get(f"/api/v1/items/{item}")
    return (time.perf_counter() - started) * 1000


def phase(url: str, token_b: str, action: Callable[[], list[str]]) -> dict[str, Any]:
    stop = threading.Event()
    probes: list[float] = []
    notes: list[float] = []

    def probe() -> None:
        with httpx.Client(base_url=url, timeout=TIMEOUT) as c:
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    c.get("/healthz")
                    probes.append((time.perf_counter() - started) * 1000)
                except httpx.HTTPError:
                    probes.append(float("nan"))
                time.sleep(0.02)

    def note() -> None:
        with httpx.Client(base_url=url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token_b}"}) as c:
            n = 0
            while not stop.is_set():
                notes.append(_ready_ms(c, n))
                n += 1
                stop.wait(2.0)

    threads = [threading.Thread(target=probe, daemon=True), threading.Thread(target=note, daemon=True)]
    for t in threads:
        t.start()
    started = time.perf_counter()
    answers = action()
    took = time.perf_counter() - started
    stop.set()
    for t in threads:
        t.join(TIMEOUT)
    return {"probes": [p for p in probes if p == p], "failed": sum(1 for p in probes if p != p),
            "notes": [n for n in notes if n == n], "answers": answers, "took": took}


def _post(c: httpx.Client, data: bytes, name: str = "vault.zip") -> httpx.Response:
    return c.post("/api/v1/imports", files={"file": (name, data, "application/zip")})


def _wait(c: httpx.Client, import_id: str) -> dict[str, Any]:
    while True:
        body: dict[str, Any] = c.get(f"/api/v1/imports/{import_id}").json()
        if body["status"] == "done":
            return body
        time.sleep(0.5)


def hostile(c: httpx.Client, lev: Any) -> Callable[[], list[str]]:
    cases = [("100,000 tiny files", tiny_files(100_000)), ("a bomb of zeros (72 MiB in 74 KB)", zeros_bomb()),
             ("2.25 GB declared", declared_sizes(zip_of({f"B/f{n}.txt": "x" * 1000 for n in range(50)}),
                                                 45_000_000)),
             ("truncated", zip_of({"V/a.md": "# A\n\nwords\n"})[:-40]),
             ("a ../ path", zip_of({"V/../../evil.md": "# evil\n"})), ("15,000 entries", tiny_files(15_000))]

    def act() -> list[str]:
        out = []
        for name, data in cases:
            started = time.perf_counter()
            r = _post(c, data)
            took = time.perf_counter() - started
            out.append(f"{name}: {r.status_code} {r.json().get('error') or r.json().get('status')} in {took:.2f} s")
            if r.status_code == 202:  # not ingested: the phase measures the reading
                lev.admin.sql("UPDATE import_entries SET status = 'done' WHERE import_id = :i", i=r.json()["id"])
        return out
    return act


def import_vault(c: httpx.Client, data: bytes, label: str) -> Callable[[], list[str]]:
    def act() -> list[str]:
        started = time.perf_counter()
        r = _post(c, data)
        answered = time.perf_counter() - started
        body = _wait(c, r.json()["id"])
        took = time.perf_counter() - started
        return [f"{label}: answered in {answered:.2f} s, done in {took:.1f} s ({VAULT / took:.1f} files/s): "
                f"{body['added']} added, {body['unchanged']} unchanged, {body['failed']} failed, "
                f"{len(body['folders'])} folders"]
    return act


def sync_twice(url: str, token: str, root: Path) -> Callable[[], list[str]]:
    def act() -> list[str]:
        out = []
        for label in ("first run", "unchanged"):
            client = Client(url, token)
            started = time.perf_counter()
            stdout, sys.stdout = sys.stdout, io.StringIO()
            try:
                code = sync_command.main([str(root), "--url", url, "--folder", "Synced", "--token", token,
                                          "--no-state"], client=client)
                line = sys.stdout.getvalue().strip().splitlines()[-1]
            finally:
                sys.stdout = stdout
                client.close()
            out.append(f"lev sync, {label}: exit {code} in {time.perf_counter() - started:.1f} s, {client.writes} "
                       f"writes ({line.removeprefix('lev sync: ')})")
        return out
    return act


def quiet() -> list[str]:
    time.sleep(QUIET_SEC)
    return [f"nothing else for {QUIET_SEC:.0f} s"]


def _row(name: str, r: dict[str, Any]) -> str:
    probes = r["probes"]
    notes = r["notes"]
    p = fmt_pct(pct(probes)) if probes else "-"
    worst = f"{max(probes):.0f}" if probes else "-"
    b = f"{np.percentile(notes, 50) / 1000:.1f} / {max(notes) / 1000:.1f}" if notes else "-"
    return f"| {name} | {len(probes)} | {p} | {worst} | {len(notes)} | {b} | {r['took']:.1f} |"


def main() -> str:
    lev = start_lev({"LEV_JOBS_PER_USER": "2"})
    root = Path(tempfile.mkdtemp(prefix="levbench-sync-"))
    try:
        user_b = new_user(lev.admin)
        token_b = user_b.token(write=True, write_cap=0, name="b")
        c = httpx.Client(base_url=lev.url, timeout=TIMEOUT, headers=lev.headers())
        notes = vault(VAULT)
        data = zip_of(notes)
        for rel, text in notes.items():
            path = root / rel.removeprefix("Vault/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        results = {
            "quiet": phase(lev.url, token_b, quiet),
            "hostile archives": phase(lev.url, token_b, hostile(c, lev)),
            f"a vault of {VAULT} notes": phase(lev.url, token_b, import_vault(c, data, "first import")),
            "the same vault again": phase(lev.url, token_b, import_vault(c, data, "again")),
            "lev sync of the notes, twice": phase(lev.url, token_b, sync_twice(lev.url, lev.token, root)),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
        cleanup(lev)
    lines = ["| phase | probes | /healthz p50 / p95 / p99 ms | max ms | B's notes | B's note to ready p50 / max s "
             "| phase s |", "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [_row(name, r) for name, r in results.items()]
    lines.append("")
    for name, r in results.items():
        for answer in r["answers"]:
            lines.append(f"- {name}: {answer}")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        size = sum(i.file_size for i in zf.infolist())
    lines.append(f"\nThe vault: {VAULT} notes, {size / 2**20:.2f} MiB of Markdown in {len(data) / 2**20:.2f} MiB of "
                 "ZIP, 6 folders.")
    return "\n".join(lines)
