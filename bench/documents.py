"""Issue 48: what reading the documents people keep costs, and what it leaves for everyone else.

Files (generated once, cached under /tmp/lev-bench-documents): a 300-page .docx (a heading and five paragraphs a
page, a bulleted list and a table every ten pages; python-docx), a .xlsx just under the 50 MB upload cap (a sales
ledger of 12 columns: ids, dates, categories, amounts, customer names, product codes, a short note; openpyxl's
write-only mode), and hostile ones (a ZIP bomb, a billion laughs, a sheet whose second row is numbered 900 million).

Reader: each file read by `lev.ingest.formats.extract` in a fresh process of its own (wall time, peak resident
memory of that process, the text kept). Server: a fresh stack (worker inline); user A uploads each file through the
handshake while `/healthz` is asked every 20 ms and user B saves a short note every second (bench/unfair.py's
phase); what A's upload answered and how long until its item was ready.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench import unfair
from bench.common import ROOT, cleanup, pct, start_lev
from tests import fixtures_documents as fd
from tests.stack import new_user

CACHE = Path(os.environ.get("LEV_BENCH_DOCUMENTS_CACHE", "/tmp/lev-bench-documents"))
XLSX_BYTES = 50 * 1024 * 1024 - 512 * 1024  # just under the upload cap
READY_TIMEOUT = 1800.0
READ_ALONE_SEC = 240.0  # a reader alone, past which it is stopped
DOCX = fd.DOCX
XLSX = fd.XLSX


def report_docx(pages: int = 300) -> bytes:
    """A report of `pages` pages: a heading and five paragraphs a page; a list and a table every tenth page."""
    from docx import Document

    rng = random.Random(48)
    words = ("harbour keeper lamp tide beacon storm ledger cargo pilot reef survey winter budget crew chart "
             "lantern quay mooring fog signal wreck coast granite oil lens almanac vessel anchor").split()
    d = Document()
    d.core_properties.title = "Annual report of the harbour board"
    for page in range(1, pages + 1):
        d.add_heading(f"Section {page}: {' '.join(rng.choices(words, k=3))}", 1 if page % 10 == 1 else 2)
        for _ in range(5):
            d.add_paragraph(" ".join(rng.choices(words, k=70)).capitalize() + ".")
        if page % 10 == 0:
            for _ in range(4):
                d.add_paragraph(" ".join(rng.choices(words, k=8)), style="List Bullet")
            table = d.add_table(rows=6, cols=4)
            for r in range(6):
                for c in range(4):
                    table.cell(r, c).text = ("Item", "Q1", "Q2", "Owner")[c] if r == 0 else rng.choice(words)
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def ledger_xlsx(target: int = XLSX_BYTES) -> bytes:
    """A sales ledger as large as `target` bytes (a sample sizes the row count; rows are cut to fit)."""
    from openpyxl import Workbook

    def write(rows: int) -> bytes:
        rng = random.Random(7)
        names = [f"{rng.choice(['Ada', 'Bram', 'Cora', 'Dov', 'Ena', 'Finn'])} {rng.randrange(10**5)}"
                 for _ in range(5000)]
        cats, regions = [f"category {i}" for i in range(20)], ["north", "south", "east", "west", "isles"]
        vocab = [f"w{i}" for i in range(2000)]
        wb = Workbook(write_only=True)
        ws = wb.create_sheet("Ledger")
        ws.append(["Id", "Date", "Category", "Region", "Amount", "Quantity", "Customer", "Product", "Unit price",
                   "Discount", "Paid", "Note"])
        for i in range(rows):
            ws.append([i, f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}", rng.choice(cats), rng.choice(regions),
                       round(rng.uniform(1, 5000), 2), rng.randrange(1, 100), rng.choice(names),
                       f"P{rng.randrange(16**8):08x}", round(rng.uniform(1, 99), 2), rng.choice([0, 5, 10, 15]),
                       rng.choice(["yes", "no"]), " ".join(rng.choices(vocab, k=5))])
        out = io.BytesIO()
        wb.save(out)
        return out.getvalue()

    sample = 20_000
    per_row = len(write(sample)) / sample
    rows = int(target / per_row * 0.98)
    data = write(rows)
    while len(data) > target:
        rows = int(rows * 0.97)
        data = write(rows)
    return data


def slow_xlsx() -> bytes:
    """A sheet whose second row is numbered 900 million: its reader walks the gap row by row until stopped."""
    import zipfile

    src = zipfile.ZipFile(io.BytesIO(fd.xlsx(rows=1)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == "xl/worksheets/sheet1.xml":
                for col in (b"A", b"B", b"C"):
                    body = body.replace(b'r="' + col + b'2"', b'r="' + col + b'900000000"')
                body = body.replace(b'<row r="2"', b'<row r="900000000"')
            z.writestr(info, body)
    return out.getvalue()


def files() -> dict[str, tuple[str, str, bytes]]:
    """name -> (file name, MIME type, bytes), cached on disk."""
    CACHE.mkdir(parents=True, exist_ok=True)
    makers: dict[str, tuple[str, str, Callable[[], bytes]]] = {
        "300-page .docx": ("report.docx", DOCX, report_docx),
        "50 MB .xlsx": ("ledger.xlsx", XLSX, ledger_xlsx),
        "ZIP bomb .docx (64 MiB of spaces)": ("bomb.docx", DOCX, fd.zip_bomb_docx),
        "billion laughs .docx": ("laughs.docx", DOCX, fd.entity_docx),
        "slow .xlsx (row 900,000,000)": ("slow.xlsx", XLSX, slow_xlsx),
    }
    out = {}
    for name, (filename, mime, make) in makers.items():
        path = CACHE / filename
        if not path.exists():
            path.write_bytes(make())
        out[name] = (filename, mime, path.read_bytes())
    return out


READ = """
import json, resource, sys, time
from lev.ingest import formats
from lev.core.errors import ApiError
path, mime, name = sys.argv[1:4]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
try:
    doc = formats.extract(mime, path, name)
    out = {"chars": len(doc.text), "truncated": bool(doc.metadata.get("truncated")), "answer": "read"}
except ApiError as exc:
    out = {"answer": f"{exc.status} {exc.code}: {(exc.message or '')[:80]}"}
out["sec"] = time.perf_counter() - started
out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["rss_before_mib"] = before / 1024
print(json.dumps(out))
"""


def read_alone(filename: str, mime: str, data: bytes) -> dict[str, Any]:
    """`formats.extract` of one file in a fresh process, without the server's time bound (what the reader itself
    costs), stopped after READ_ALONE_SEC: a reader still going then is reported so (the 900-million-row sheet)."""
    path = CACHE / filename
    try:
        proc = subprocess.run([sys.executable, "-c", READ, str(path), mime, filename], cwd=ROOT, capture_output=True,
                              text=True, timeout=READ_ALONE_SEC)
    except subprocess.TimeoutExpired:
        return {"answer": f"still reading after {READ_ALONE_SEC:.0f} s: stopped", "sec": READ_ALONE_SEC,
                "rss_mib": float("nan")}
    if proc.returncode != 0:
        return {"answer": f"exit {proc.returncode}: {proc.stderr[-200:]}", "sec": float("nan"),
                "rss_mib": float("nan")}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def upload_action(url: str, token: str, filename: str, mime: str, data: bytes,
                  timings: dict[str, float]) -> Callable[[], list[str]]:
    def act() -> list[str]:
        with httpx.Client(base_url=url, timeout=READY_TIMEOUT, headers={"Authorization": f"Bearer {token}"}) as c:
            started = time.perf_counter()
            signed = c.post("/api/v1/uploads/signed-url",
                            json={"mime": mime, "size": len(data), "filename": filename}).json()
            httpx.put(signed["signed_url"], content=data, headers={"Content-Type": mime}, timeout=READY_TIMEOUT)
            put_done = time.perf_counter()
            r = c.post("/api/v1/uploads/finalize-document", json={"path": signed["path"], "mime": mime,
                                                                   "size": len(data), "filename": filename,
                                                                   "auto_transform": False})
            timings["answer"] = time.perf_counter() - put_done
            answer = unfair._answer(r)
            if r.status_code != 200:
                timings["ready"] = float("nan")
                return [answer]
            item_id = r.json()["user_item_id"]
            item = c.get(f"/api/v1/items/{item_id}").json()
            while item["status"] == "processing" and time.perf_counter() - started < READY_TIMEOUT:
                time.sleep(0.5)
                item = c.get(f"/api/v1/items/{item_id}").json()
            timings["ready"] = time.perf_counter() - put_done
            timings["chars"] = len(item.get("text") or "")
            return [f"{answer} → {item['status']}" + (f" ({item['error'][:60]})" if item.get("error") else "")]
    return act


def main() -> str:
    docs = files()
    lines = ["### Reading documents: the reader alone, then through the server", "",
             "Reader: `formats.extract` in a fresh process per file, no time bound (the bounded child a server "
             "uses would stop a reader past 30 s + 6 s per MB).", "",
             "| file | bytes | answer | seconds | peak RSS (MiB; interpreter and libraries alone) | text kept "
             "(characters) |", "| --- | --- | --- | --- | --- | --- |"]
    for name, (filename, mime, data) in docs.items():
        r = read_alone(filename, mime, data)
        kept = f"{r['chars']:,}" + (" (cut at the cap)" if r.get("truncated") else "") if "chars" in r else "-"
        lines.append(f"| {name} | {len(data):,} | {r['answer']} | {r['sec']:.1f} | {r['rss_mib']:.0f} "
                     f"({r.get('rss_before_mib', float('nan')):.0f}) | {kept} |")
    lines += ["", "Server (worker inline, a fresh stack): user A uploads each file in turn; `/healthz` every 20 ms, "
              f"user B's note every second (note to ready), each phase {unfair.AFTER_SEC:g} s past A's upload.", "",
              "| file | finalize answered (s) | ready (s) | A's upload | /healthz p50 / p99 / max (ms) | B's note "
              "p50 / p95 / max (ms) | RSS peak (MiB) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    lev = start_lev({"LEV_WORKERS_INLINE": "true"})
    proc = psutil.Process(lev.server.proc.pid)  # type: ignore[union-attr]
    try:
        token_b = new_user(lev.admin).token(write=True, write_cap=0, name="b")
        for name, (filename, mime, data) in docs.items():
            timings: dict[str, float] = {}
            out = unfair.phase(lev.url, proc, token_b, upload_action(lev.url, lev.token, filename, mime, data,
                                                                     timings))
            h, n = pct(out["probes"] or [float("nan")]), pct(out["notes"] or [float("nan")])
            lines.append(f"| {name} | {timings.get('answer', float('nan')):.1f} | "
                         f"{timings.get('ready', float('nan')):.1f} | {'; '.join(out['answers'])} | "
                         f"{h['p50']:.1f} / {h['p99']:.1f} / {max(out['probes'] or [0]):.0f} | "
                         f"{n['p50']:.0f} / {n['p95']:.0f} / {max(out['notes'] or [0]):.0f} | {out['rss']:.0f} |")
    finally:
        cleanup(lev)
    lines += ["", f"Load average (1/5/15 min) at the end: {' / '.join(f'{x:.1f}' for x in os.getloadavg())}."]
    return "\n".join(lines)
