"""The cluster through its balancer, and the faults it must survive (real processes, killed for real)."""

from __future__ import annotations

import shutil
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import httpx
from PIL import Image

from tests import fixtures_media as fm
from tests.cluster.conftest import Ops
from tests.sites import Site
from tests.transcribe_stub import TranscribeStub

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


def s3_upload(c: httpx.Client, path: Path, mime: str, **extra: Any) -> httpx.Response:
    """The upload handshake with the bytes going straight to S3 through the presigned PUT."""
    data = path.read_bytes()
    signed = c.post("/api/v1/uploads/signed-url", json={"mime": mime, "size": len(data), "filename": path.name})
    assert signed.status_code == 200, signed.text
    s = signed.json()
    assert s["signed_url"].startswith("http://127.0.0.1:") and "X-Amz-Signature" in s["signed_url"]
    put = httpx.put(s["signed_url"], content=data, headers=s["headers"], timeout=60)
    assert put.status_code == 200, put.text
    return c.post(f"/api/v1/uploads/{s['finalize_endpoint']}",
                  json={"path": s["path"], "mime": mime, "size": len(data), "filename": path.name, **extra})


def scanned_pdf(path: Path, pages: int, tag: str) -> Path:
    images = []
    for n in range(pages):
        page = Image.new("RGB", (1275, 1650), "white")
        page.paste(fm.text_image([f"Harbour log {tag} page {n}", "Tide tables and ferry crossings"], size=44,
                                 width=1100), (80, 120))
        images.append(page)
    images[0].save(path, format="PDF", resolution=150.0, save_all=True, append_images=images[1:])
    return path


def long_text(tag: str, sentences: int = 700) -> str:
    """A text of about 75 chunks: more than the 60 embedded in the request, so a worker embeds it."""
    return " ".join(f"Sentence {i} {tag} about kelp forests and the otters that live in them."
                    for i in range(sentences))


def mcp(c: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    r = c.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers=MCP_HEADERS)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_flows_through_the_balancer(ops: Ops, transcribe_stub: TranscribeStub, tmp_path: Path) -> None:
    """REST and MCP flows land on both APIs and jobs on both workers; limits, the write cap and the activity log
    are exact across processes; a deleted upload is drained from S3."""
    token = ops.token_by_cli()
    c = ops.client(token)
    backends: list[str] = []
    c.event_hooks["response"] = [lambda r: backends.append(r.headers.get("x-lev-backend", "?"))]
    tag = uuid.uuid4().hex[:6]
    jobs_before = [ops.metric(n, "lev_jobs_total") for n in (1, 2)]

    def call(method: str, url: str, **kw: Any) -> httpx.Response:
        return c.request(method, url, **kw)

    # uploads to S3: a PDF (extracted in the request) and audio (transcribed by a worker)
    pdf = fm.make_text_pdf(tmp_path / "minutes.pdf", [f"Council minutes {tag}: the pier will be rebuilt."])
    r = s3_upload(c, pdf, "application/pdf")
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    pdf_item = r.json()["user_item_id"]
    obj = ops.sql("SELECT object_path FROM contents WHERE id = %s", r.json()["content_id"])[0][0]
    wav_name = f"harbour-{tag}.wav"
    transcribe_stub.text(wav_name, f"Harbour radio {tag}: gulls circle the trawlers at first light.")
    r = s3_upload(c, fm.make_wav(tmp_path / wav_name, seconds=2.0), "audio/wav")
    assert r.status_code == 200 and r.json()["status"] == "transcribing", r.text
    audio_item = r.json()["user_item_id"]
    site = Site()
    try:
        r = call("POST", "/api/v1/ingest", json={"kind": "url", "url": f"{site.url}/sourdough"})
        assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    finally:
        site.close()
    ingest_calls = 5  # two uploads (signed URL + finalize) and the page share the token's 60/hour ingest class
    while ingest_calls < 60:
        r = call("POST", "/api/v1/ingest", json={"kind": "text", "text": f"Note {ingest_calls} {tag} on tidal pools",
                                                 "auto_transform": ingest_calls < 20})  # 15 transform jobs
        assert r.status_code == 200, r.text
        ingest_calls += 1
    r = call("POST", "/api/v1/ingest", json={"kind": "text", "text": f"One too many {tag}"})
    assert r.status_code == 429 and r.json()["error"] == "rate_limited", r.text  # the 61st, whichever API
    out = mcp(c, "tools/call", {"name": "search_knowledge_base", "arguments": {"query": f"tidal pools {tag}"}})
    assert out["result"]["structuredContent"]["results"], out
    r = call("GET", "/api/v1/search", params={"q": f"council minutes pier {tag}"})
    assert pdf_item in [x["item_id"] for x in r.json()["results"]]
    item = ops.wait_item(c, audio_item)
    assert item["status"] == "ready" and "gulls circle the trawlers" in item["transcript"]
    r = call("DELETE", f"/api/v1/items/{pdf_item}")
    assert r.status_code == 200
    assert {"api1", "api2"} <= set(backends), backends

    # the monthly write cap across processes
    capped = ops.client(ops.token(write_cap=3))
    codes = [capped.post("/api/v1/ingest", json={"kind": "text", "text": f"cap {i} {tag}"}) for i in range(4)]
    assert [r.status_code for r in codes] == [200, 200, 200, 429], [r.text for r in codes]
    assert codes[3].json()["limit"] == "monthly_writes"
    assert len({r.headers["x-lev-backend"] for r in codes}) == 2

    # jobs (15 transforms, a transcription) ran on both workers
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        grown = [ops.metric(n, "lev_jobs_total") - jobs_before[n - 1] for n in (1, 2)]
        if all(g >= 3 for g in grown):
            break
        time.sleep(0.5)
    assert all(g >= 3 for g in grown), grown

    # the activity log holds exactly one entry per request, whichever API served it
    assert ops.activity_total(c, backends) == len(backends) - 1  # all but the last poll, not yet logged

    # the deleted upload's object leaves S3 (the drain runs every minute; a run is queued now instead)
    s3 = boto3.client("s3", endpoint_url=ops.c.s3_url, region_name="us-east-1", aws_access_key_id="cluster",
                      aws_secret_access_key="cluster-secret")
    ops.run_cron_now("drain_object_deletions")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=ops.c.bucket).get("Contents", [])]
        if obj not in keys:
            break
        time.sleep(0.2)
    assert obj not in keys


def test_workers_killed_mid_job_finish_elsewhere_once_or_give_up(ops: Ops, transcribe_stub: TranscribeStub,
                                                                   tmp_path: Path) -> None:
    """kill -9 of the worker in the middle of a document extraction and of a transcription: both finish on the
    other worker, ready exactly once (no duplicate chunks, one transcription charge). A job whose worker dies on
    every try (LEV_JOB_MAX_TRIES=2 here) is given up on its third pick-up and marks its item failed with the reason.

    worker2 is paused (SIGSTOP) while the three jobs are queued, so worker1 runs all three and one kill hits them
    all; worker2 then rescues them, and the doomed job's second run dies with worker2. Each killed worker's
    replacement is started at once, as a supervisor would, and boots meanwhile."""
    ops.ensure_workers()
    c = ops.client(ops.token())
    tag = uuid.uuid4().hex[:6]
    w1, w2 = ops.c.procs["worker1"], ops.c.procs["worker2"]
    slow, doomed = f"slow-{tag}.wav", f"doomed-{tag}.wav"
    transcribe_stub.delay(slow, 5.0)
    transcribe_stub.text(slow, f"Harbour radio {tag}: the ferry leaves at noon.")
    transcribe_stub.delay(doomed, 120.0)
    w2.signal(signal.SIGSTOP)
    try:
        r = s3_upload(c, fm.make_wav(tmp_path / doomed, seconds=2.0), "audio/wav", auto_transform=False)
        assert r.status_code == 200, r.text
        doomed_item = r.json()["user_item_id"]
        r = s3_upload(c, fm.make_wav(tmp_path / slow, seconds=30.0), "audio/wav", auto_transform=False)
        assert r.status_code == 200, r.text
        slow_content, slow_item = r.json()["content_id"], r.json()["user_item_id"]
        r = s3_upload(c, scanned_pdf(tmp_path / "scan.pdf", 6, tag), "application/pdf", auto_transform=False)
        assert r.status_code == 200 and r.json()["status"] == "processing", r.text
        doc_content, doc_item = r.json()["content_id"], r.json()["user_item_id"]
        deadline = time.monotonic() + 120
        while not (len(transcribe_stub.calls(slow)) == len(transcribe_stub.calls(doomed)) == 1
                   and sorted(f for f, _ in ops.running().values()) == [
                       "extract_document", "transcribe_content", "transcribe_content"]):
            assert time.monotonic() < deadline, ops.running()
            time.sleep(0.05)
        running = ops.running()
        assert {pid for _, pid in running.values()} == {w1.pid}, running
        # counted on both machines: on a slow run worker1 may finish the extraction just before its kill
        ok_before = sum(ops.metric(n, "lev_jobs_total", job="extract_document", outcome="ok") for n in (1, 2))
        ops.kill_and_replace("worker1")  # in the middle of all three
    finally:
        w2.signal(signal.SIGCONT)
    # worker2 rescues the three jobs once worker1's heartbeat lapses; the extraction and the transcription finish
    doc = ops.wait_item(c, doc_item, timeout=180)
    assert doc["status"] == "ready" and doc["metadata"]["ocr_pages"] == 6, doc
    assert sum(ops.metric(n, "lev_jobs_total", job="extract_document", outcome="ok") for n in (1, 2)) == ok_before + 1
    assert doc_item in [x["item_id"] for x in c.get("/api/v1/search", params={"q": f"harbour log {tag}"}).json()[
        "results"]]
    audio = ops.wait_item(c, slow_item, timeout=120)
    assert audio["status"] == "ready" and audio["transcription_status"] == "done", audio
    assert len(transcribe_stub.calls(slow)) == 2  # the killed attempt and the one that finished
    user_id = ops.sql("SELECT user_id FROM user_items WHERE id = %s", slow_item)[0][0]
    charged = ops.sql("SELECT coalesce(sum(transcription_seconds), 0) FROM usage_monthly WHERE user_id = %s",
                      user_id)[0][0]
    assert abs(float(charged) - 30.0) < 0.5, charged
    for content_id in (doc_content, slow_content):
        chunks = ops.sql("SELECT count(*), count(DISTINCT ord) FROM chunks WHERE content_id = %s", content_id)[0]
        assert chunks[0] == chunks[1] > 0, chunks
    # the doomed job's second run (on worker2, or on worker1's replacement when it boots first) dies with its
    # worker; the third pick-up gives it up
    deadline = time.monotonic() + 60
    while len(transcribe_stub.calls(doomed)) < 2:
        assert time.monotonic() < deadline, "the doomed job never ran again"
        time.sleep(0.05)
    [runner] = {pid for f, pid in ops.running().values() if f == "transcribe_content"}
    [second] = [name for name in ("worker1", "worker2") if ops.c.procs[name].pid == runner]
    ops.kill_and_replace(second)
    item = ops.wait_item(c, doomed_item, timeout=180)
    assert item["status"] == "failed" and item["transcription_status"] == "failed", item
    assert "abandoned after 2 attempts" in item["error"]
    assert len(transcribe_stub.calls(doomed)) == 2


def news(logs: list[Path], seen: list[int]) -> list[bytes]:
    """What each log gained since its size was taken."""
    return [log.read_bytes()[n:] for log, n in zip(logs, seen, strict=True)]


def test_postgres_restart_answers_503_fast_and_recovers(ops: Ops) -> None:
    """While PostgreSQL is down the API answers 503 fast; a job that meets the outage waits for the database
    instead of spending its tries (2 here, 1 s apart) during it, so its item is ready after the restart."""
    ops.ensure_workers()
    token = ops.token()
    c = ops.client(token)
    assert c.get("/api/v1/items").status_code == 200
    workers = [ops.c.procs[f"worker{i}"] for i in (1, 2)]
    logs = [ops.c.base / f"worker{i}.log" for i in (1, 2)]
    seen = [log.stat().st_size for log in logs]
    for w in workers:
        w.signal(signal.SIGSTOP)  # the job stays queued until the database is gone
    try:
        r = c.post("/api/v1/ingest", json={"kind": "text", "text": long_text("outage"), "title": "Kelp"})
        assert r.status_code == 200 and r.json()["status"] == "processing", r.text
        kelp = r.json()["user_item_id"]
        ops.c.stop_postgres()
    finally:
        for w in workers:
            w.signal(signal.SIGCONT)
    try:
        deadline = time.monotonic() + 30
        while not any(b"job hit an outage" in tail for tail in news(logs, seen)):
            assert time.monotonic() < deadline, [tail[-1500:] for tail in news(logs, seen)]
            time.sleep(0.1)
        met = time.monotonic()
        timings = []
        for _ in range(6):
            started = time.monotonic()
            r = c.get("/api/v1/items")
            timings.append(time.monotonic() - started)
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "unavailable" and r.headers["retry-after"]
        assert max(timings) < 6, timings
        ready = httpx.get(f"{ops.c.api_url(2)}/readyz", timeout=10)
        assert ready.status_code == 503 and "database" in ready.json()["failed"]
        out = c.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "list_recent", "arguments": {}}}, headers=MCP_HEADERS)
        assert out.status_code in (200, 503) and "internal_error" not in out.text, out.text
        time.sleep(max(0.0, met + 4 - time.monotonic()))  # longer than both tries' retry delays (1 s + 2 s)
    finally:
        ops.c.start_postgres()
    deadline = time.monotonic() + 20
    statuses = []
    while time.monotonic() < deadline:
        statuses.append(c.get("/api/v1/items").status_code)
        if statuses[-3:] == [200, 200, 200]:
            break
        time.sleep(0.2)
    assert statuses[-3:] == [200, 200, 200] and 500 not in statuses, statuses
    assert httpx.get(f"{ops.c.url}/readyz", timeout=10).status_code == 200
    assert ops.wait_item(c, kelp)["status"] == "ready"  # its job, retried after the outage
    tail = b"".join(news(logs, seen))
    assert b"job failed on its last try" not in tail and b"job abandoned" not in tail, tail[-3000:]


def test_redis_restart_loses_no_queued_job(ops: Ops) -> None:
    """Jobs queued while the workers are paused (SIGSTOP) survive a Redis restart (AOF); a worker polling while
    Redis is down waits for it instead of exiting; reads keep working meanwhile (the hourly limiter fails open)."""
    ops.ensure_workers()
    c = ops.client(ops.token())
    workers = [ops.c.procs[f"worker{i}"] for i in (1, 2)]
    pids = [w.pid for w in workers]
    tag = uuid.uuid4().hex[:6]
    items = []
    for w in workers:
        w.signal(signal.SIGSTOP)  # they take no job now: what is queued below stays queued
    try:
        for i in range(2):
            r = c.post("/api/v1/ingest", json={"kind": "text", "text": long_text(f"{i}{tag}"),
                                               "title": f"Pools {i} {tag}"})
            assert r.status_code == 200 and r.json()["status"] == "processing", r.text
            items.append(r.json()["user_item_id"])
        assert ops.metric(1, "lev_queue_depth") >= 2
        redis_proc = ops.c.procs["redis"]
        redis_proc.signal(signal.SIGTERM)  # a restart: Redis writes its AOF and exits
        assert redis_proc.proc is not None
        redis_proc.proc.wait(30)
        try:
            log = ops.c.base / "worker2.log"
            seen = log.stat().st_size
            workers[1].signal(signal.SIGCONT)  # this one polls an absent Redis
            r = c.get("/api/v1/search", params={"q": "anemones", "mode": "keyword"})
            assert r.status_code == 200, r.text
            deadline = time.monotonic() + 30
            while b"Redis unavailable" not in log.read_bytes()[seen:]:
                assert time.monotonic() < deadline and workers[1].alive(), log.read_bytes()[seen:][-2000:]
                time.sleep(0.1)
        finally:
            ops.c.start_redis()
    finally:
        for w in workers:
            w.signal(signal.SIGCONT)
    for item_id in items:
        assert ops.wait_item(c, item_id, timeout=180)["status"] == "ready"
    assert [w.pid for w in workers] == pids and all(w.alive() for w in workers)  # no worker had to be restarted


RELEASE_MIGRATION = Path(__file__).parent / "upgrade_migration.py"


def new_release(ops: Ops) -> Path:
    """A copy of the source tree with one migration more, standing for the next release: the test-only revision
    (tests/cluster/upgrade_migration.py) is placed after this code's head in the copy's migrations, never in the
    product chain."""
    from lev.store.db import head_revision

    release = ops.c.base / "release"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("lev", "web"):
        shutil.copytree(ops.c.release / part, release / part, ignore=ignore, symlinks=True)  # lev/web links
    for name in ("openapi.yaml", "mcp_tools.json"):
        shutil.copy(ops.c.release / name, release / name)
    text = RELEASE_MIGRATION.read_text().replace('down_revision = None', f'down_revision = "{head_revision()}"')
    (release / "lev" / "store" / "migrations" / "versions" / "9001_upgrade_probe.py").write_text(text)
    return release


def test_api_killed_then_upgraded_with_a_migration_under_load(ops: Ops) -> None:
    """One load through the balancer for both API faults.

    kill -9 of api1: at most the requests in flight on it fail, every acknowledged ingest is stored, and the
    balancer sends everything after to api2. Then an upgrade to a release with a real schema migration: `lev
    migrate` of the new release (a column added and backfilled, an index built concurrently) while api2 of the
    old release serves, api1 started from the new release, api2 given SIGTERM and replaced by the new release.
    Not one request fails during the upgrade (the one in flight finishes, the balancer retries refused
    connections), and everything acknowledged is stored and finishes (the old release's workers run on the new
    schema)."""
    ops.ensure_workers()
    release = new_release(ops)
    tag = uuid.uuid4().hex[:6]
    results: list[tuple[float, str, int | str]] = []
    acknowledged: list[str] = []
    stop = threading.Event()

    def load(n: int) -> None:
        with ops.client(ops.token()) as c:
            i = 0
            while not stop.is_set():
                i += 1
                if i % 300 == 0:  # a fresh token now and then: each stays under its hourly limits
                    c.headers["Authorization"] = f"Bearer {ops.token()}"
                try:
                    if i % 10 == 0:
                        # one long ingest per client: acknowledged as processing, finished by a worker
                        text = long_text(f"load {tag} {n}-{i}") if i == 50 else f"load {tag} {n}-{i}"
                        r = c.post("/api/v1/ingest", json={"kind": "text", "text": text})
                        if r.status_code == 200:
                            acknowledged.append(r.json()["user_item_id"])
                    else:
                        r = c.get("/api/v1/search", params={"q": f"load {tag}", "mode": "keyword"})
                    results.append((time.monotonic(), r.request.method, r.status_code))
                except httpx.HTTPError as exc:
                    results.append((time.monotonic(), "error", type(exc).__name__))
                time.sleep(0.05)

    threads = [threading.Thread(target=load, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(2)
        killed_at = time.monotonic()
        ops.c.procs["api1"].kill9()
        time.sleep(4)
        upgrade_at = time.monotonic()
        ops.c.release = release  # from here on every process starts from the new release
        ops.c.lev("migrate")
        assert ops.sql("SELECT version_num FROM alembic_version")[0][0] == "9001"
        # the old release stays ready on the newer schema (a balancer probing /readyz keeps it)
        assert httpx.get(f"{ops.c.api_url(2)}/readyz", timeout=10).status_code == 200
        ops.c.start_api(1)
        ops.c.wait_api(1)
        ops.c.wait_balanced(1)
        ops.c.drain(2)  # out of the balancer first, as docs/operations.md's rolling upgrade says
        ops.c.procs["api2"].stop()
        ops.c.start_api(2)
        ops.c.wait_api(2)
        ops.c.undrain(2)
        ops.c.wait_balanced(2)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    failed = [r for r in results if r[2] != 200]
    print(f"\n{len(results)} requests under load, {len(failed)} failed around the kill: {failed}")
    assert len(failed) <= 4, failed  # only what was in flight on api1
    assert all(r[0] - killed_at < 3 for r in failed), failed  # and only around the kill
    assert len([r for r in results if killed_at + 3 < r[0] < upgrade_at]) > 10  # routed around the dead one
    assert len([r for r in results if r[0] > upgrade_at]) > 100
    # the new schema is in place: the column (backfilled), its index
    assert ops.sql("SELECT count(*) FROM user_items WHERE upgrade_probe = kind")[0][0] > 0
    assert ops.sql("SELECT count(*) FROM pg_indexes WHERE indexname = 'user_items_upgrade_probe'")[0][0] == 1
    # nothing acknowledged was lost, and what a worker had to finish finished
    assert len(acknowledged) > 20
    deadline = time.monotonic() + 180
    while True:
        stored = dict(ops.sql("SELECT id::text, status FROM user_items WHERE id = ANY(%s::uuid[])", acknowledged))
        assert len(stored) == len(acknowledged)
        if set(stored.values()) == {"ready"}:
            break
        assert time.monotonic() < deadline, stored
        time.sleep(0.5)
    assert httpx.get(f"{ops.c.url}/readyz", timeout=10).status_code == 200
