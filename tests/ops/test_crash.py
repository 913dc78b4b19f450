"""Acknowledged work survives kill -9 of every process (Lev, its embedded PostgreSQL and Redis): after a restart
each item reaches ready exactly once (no duplicate chunks, outputs or quota charge), and the monthly write cap
remembers what it counted, even when Redis lost everything.

The stack here is private (its own data dir), since the test kills its database.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from PIL import Image

from lev.ingest.chunking import chunk_text
from tests import fixtures_media as fm
from tests.fixtures_imports import chromium_bookmarks
from tests.ingest.test_uploads import upload
from tests.sites import Site
from tests.stack import LiveServer, mint_token
from tests.transcribe_stub import TranscribeStub

CLI_ENV = {"HF_HUB_OFFLINE": "1"}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


class Stack:
    """One Lev with its own embedded PostgreSQL and Redis, killable and restartable."""

    def __init__(self, stub: TranscribeStub) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="levcrash-", dir="/tmp"))
        # LEV_SHUTDOWN_GRACE_SEC: the clean stop at the end does not wait long for jobs still running.
        # LEV_JOBS_PER_USER: one user's import, text, document and transcription all run when everything dies.
        self.env = {"LEV_RATE_LIMITS": "off", "LEV_TRANSCRIBE_URL": stub.url, "LEV_TIER_PRO_MINUTES": "600",
                    "LEV_ALLOW_PRIVATE_URLS": "true", "LEV_SHUTDOWN_GRACE_SEC": "2", "LEV_JOBS_PER_USER": "8"}
        self.server: LiveServer | None = None
        self.lives = 0

    def start(self) -> LiveServer:
        self.lives += 1
        self.server = LiveServer(self.dir, self.env, log_name=f"life{self.lives}").start(timeout=180)
        return self.server

    def cli(self, *args: str) -> str:
        import subprocess
        import sys

        from tests.stack import ROOT

        env = {**os.environ, **CLI_ENV, "LEV_DATA_DIR": str(self.dir)}
        return subprocess.run([sys.executable, "-m", "lev.cli", *args], env=env, cwd=ROOT, check=True,
                              capture_output=True, text=True, timeout=120).stdout.strip()

    def kill_all(self, *, lose_redis: bool = False) -> None:
        """kill -9 Lev, the postmaster and every PostgreSQL backend, and Redis; optionally wipe Redis's files."""
        assert self.server is not None and self.server.proc is not None
        pg_pid = int((self.dir / "pg" / "postmaster.pid").read_text().split()[0])
        pids = [self.server.proc.pid, pg_pid, *_children(pg_pid), int((self.dir / "redis.pid").read_text())]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.server.proc.wait(30)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in pids):
            assert time.monotonic() < deadline, [p for p in pids if _alive(p)]
            time.sleep(0.1)
        if lose_redis:
            for name in ("redis.aof", "redis.rdb"):
                (self.dir / name).unlink(missing_ok=True)
        self.server = None

    def sql(self, statement: str, **params: Any) -> list[tuple[Any, ...]]:
        lines = (self.dir / "pg" / "postmaster.pid").read_text().splitlines()
        with psycopg.connect(dbname="lev", user="postgres", host=lines[4]) as conn:
            return list(conn.execute(statement, params).fetchall())

    def token(self, email: str, name: str, *, write: bool = True, write_cap: int = 0,
              folders: list[str] | None = None) -> str:
        """A token of `email` (created when new), minted in this process (a `lev` command costs seconds)."""
        sock = (self.dir / "pg" / "postmaster.pid").read_text().splitlines()[4]
        return mint_token(f"postgresql+psycopg://postgres@/lev?host={sock}", email, name=name, write=write,
                          write_cap=write_cap, folder_ids=folders)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        from lev.embedded import stop_redis

        stop_redis(self.dir)
        pid_file = self.dir / "pg" / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().split()[0])
            if _alive(pid):
                os.kill(pid, signal.SIGTERM)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def stack(transcribe_stub: TranscribeStub) -> Iterator[Stack]:
    s = Stack(transcribe_stub)
    yield s
    s.stop()


def big_text(topic: str) -> str:
    """About 63 chunks: more than the 60 a request embeds itself, so a job does it."""
    return "\n\n".join(f"Paragraph {i} about {topic}: " + " ".join(f"{topic}{i}w{j}" for j in range(60))
                       for i in range(32))


def scanned_pdf(path: Path) -> Path:
    pages = []
    for words in (["Crash report one"], ["Recovery after power loss"], ["Write ahead logging"]):
        page = Image.new("RGB", (1275, 1650), "white")
        page.paste(fm.text_image(words, size=44, width=1100), (80, 120))
        pages.append(page)
    pages[0].save(path, format="PDF", resolution=150.0, save_all=True, append_images=pages[1:])
    return path


def wait_ready(c: httpx.Client, item_ids: list[str], timeout: float) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    items: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        items = {i: c.get(f"/api/v1/items/{i}").json() for i in item_ids}
        if all(it.get("status") != "processing" for it in items.values()):
            return items
        time.sleep(0.3)
    raise AssertionError({i: (it.get("status"), it.get("transcription_status")) for i, it in items.items()})


def assert_once(stack: Stack, content_id: str, expected_chunks: int) -> None:
    total, distinct = stack.sql("SELECT count(*), count(DISTINCT ord) FROM chunks WHERE content_id = %(c)s",
                                c=content_id)[0]
    assert total == distinct == expected_chunks, (content_id, total, distinct, expected_chunks)


def test_kill_everything_mid_work_then_every_acknowledged_item_is_ready_once(stack: Stack,
                                                                            transcribe_stub: TranscribeStub,
                                                                            tmp_path: Path) -> None:
    started = time.monotonic()
    srv = stack.start()
    email = "crash@example.com"
    token = stack.token(email, "w")
    capped = stack.token(email, "capped", write_cap=2)
    c = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
    text = big_text("alpha")
    r = c.post("/api/v1/ingest", json={"kind": "text", "text": text, "title": "alpha", "auto_transform": True})
    assert r.status_code == 200 and r.json()["status"] == "processing", r.text
    text_item = r.json()
    _, r = upload(c, scanned_pdf(tmp_path / "scan.pdf"), "application/pdf", auto_transform=False)
    assert r.status_code == 200 and r.json()["status"] == "processing", r.text
    doc_item = r.json()
    transcribe_stub.delay("speech.wav", 30)
    transcribe_stub.text("speech.wav", "the recovered recording talks about durable queues")
    _, r = upload(c, fm.make_wav(tmp_path / "speech.wav", seconds=2.0), "audio/wav", auto_transform=False)
    assert r.status_code == 200 and r.json()["status"] == "transcribing", r.text
    media_item = r.json()
    w = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {capped}"}, timeout=120)
    for n in range(2):
        assert w.post("/api/v1/folders", json={"name": f"f{n}"}).status_code == 201
    deadline = time.monotonic() + 60
    while not transcribe_stub.calls("speech.wav"):  # the transcription job is under way
        assert time.monotonic() < deadline, "the transcription job never started"
        time.sleep(0.2)
    # then an import whose slow links are still being fetched when everything dies (posted once the transcription
    # runs: a busy machine may take longer than the slow links to start that job)
    site = Site()
    links = [f"{site.url}/a/{n}" for n in range(3)] + [f"{site.url}/slow/s{n}?s=10" for n in range(6)]
    r = c.post("/api/v1/imports", files={"file": ("b.html", chromium_bookmarks(
        [("folder", "Crash", [("link", f"L{n}", u) for n, u in enumerate(links)])]))})
    assert r.status_code == 202, r.text
    import_id = r.json()["id"]
    deadline = time.monotonic() + 60
    while (imp := c.get(f"/api/v1/imports/{import_id}").json())["done"] < 3:  # its quick links fetched
        assert time.monotonic() < deadline, imp
        time.sleep(0.2)
    assert imp["pending"] > 0  # the slow ones still under way
    stack.kill_all(lose_redis=True)  # Redis comes back empty: the queued and running jobs are gone too
    transcribe_stub.delay("speech.wav", 0)

    srv = stack.start()
    c = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
    w = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {capped}"}, timeout=120)
    refused = w.post("/api/v1/folders", json={"name": "third"})
    assert refused.status_code == 429 and refused.json()["limit"] == "monthly_writes", refused.text
    ids = [text_item["user_item_id"], doc_item["user_item_id"], media_item["user_item_id"]]
    items = wait_ready(c, ids, timeout=240)
    assert [items[i]["status"] for i in ids] == ["ready"] * 3, items
    assert items[media_item["user_item_id"]]["transcription_status"] == "done"
    assert_once(stack, text_item["content_id"], len(chunk_text(text, "alpha")))
    doc = items[doc_item["user_item_id"]]
    assert "write ahead" in doc["text"].lower()
    assert_once(stack, doc_item["content_id"], len(chunk_text(doc["text"], doc["title"])))
    media = items[media_item["user_item_id"]]
    assert_once(stack, media_item["content_id"], len(chunk_text(media["transcript"], media["title"])))
    charged = stack.sql("SELECT sum(transcription_seconds) FROM usage_monthly")[0][0]
    assert charged == pytest.approx(2.0, abs=0.05)  # charged once, however often the job ran
    deadline = time.monotonic() + 240  # behind the import's slow links on a busy machine
    while not c.get(f"/api/v1/items/{text_item['user_item_id']}").json()["outputs"]:
        assert time.monotonic() < deadline, "the transform never ran"
        time.sleep(0.3)
    kinds = [o["kind"] for o in c.get(f"/api/v1/items/{text_item['user_item_id']}").json()["outputs"]]
    assert len(kinds) == len(set(kinds)), kinds
    # the import acknowledged before the crash finished, every link exactly once, filed into its folder
    deadline = time.monotonic() + 120
    while (imp := c.get(f"/api/v1/imports/{import_id}").json())["status"] != "done":
        assert time.monotonic() < deadline, imp
        time.sleep(0.5)
    assert (imp["total"], imp["done"], imp["failed"]) == (9, 9, 0), imp["failures"]
    rows = stack.sql("SELECT url, count(*) FROM user_items WHERE url LIKE %(p)s GROUP BY url", p=f"{site.url}/%")
    assert sorted(rows) == sorted((u, 1) for u in links), rows
    assert {f["name"]: f["item_count"] for f in imp["folders"]}["Bookmarks bar / Crash"] == 9
    site.close()
    print(f"crash test: {time.monotonic() - started:.0f} s")


def test_embedded_redis_keeps_what_it_acknowledged_across_kill_9(tmp_path: Path) -> None:
    """The append-only file (fsync every second): a job queued a second before kill -9 is still queued."""
    import redis

    from lev.embedded import ensure_redis, stop_redis

    url = ensure_redis(tmp_path)
    client = redis.Redis.from_url(url)
    client.rpush("queued", b"job-1")
    deadline = time.monotonic() + 10
    while client.info("persistence")["aof_rewrite_in_progress"] or \
            client.info("persistence")["aof_enabled"] != 1:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(1.5)  # appendfsync everysec: what is a second old is on disk
    os.kill(int((tmp_path / "redis.pid").read_text()), signal.SIGKILL)
    client.close()
    time.sleep(0.5)
    client = redis.Redis.from_url(ensure_redis(tmp_path))
    try:
        assert client.lrange("queued", 0, -1) == [b"job-1"]
    finally:
        client.close()
        stop_redis(tmp_path)
