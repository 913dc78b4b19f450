"""The embedded stack heals itself (issue 32 item 10), with real processes and kill -9 as an out-of-memory killer
would: `lev serve` restarts the Redis or the PostgreSQL it serves within seconds and the work it had acknowledged
completes; a second `lev serve` on the same data directory refuses to start and leaves the first one's servers be;
SIGTERM stops Lev, and the servers it started, within LEV_SHUTDOWN_GRACE_SEC even while Redis is gone.

The stack is private (its own data directory), since the tests kill its servers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from lev.embedded import HANDLE_LIST, ensure_postgres, postgres_running, redis_running, release_postgres
from lev.postmaster import clear_stale_pid_file, postmaster_state
from tests import fixtures_media as fm
from tests.ingest.test_uploads import upload
from tests.old_engine import stop_server
from tests.ops.test_crash import Stack, big_text, wait_ready
from tests.stack import ROOT, free_port
from tests.transcribe_stub import TranscribeStub

GRACE_SEC = 6.0
HEAL_WITHIN_SEC = 15.0


@pytest.fixture(scope="module")
def stack(transcribe_stub: TranscribeStub) -> Iterator[Stack]:
    s = Stack(transcribe_stub)
    s.env["LEV_SHUTDOWN_GRACE_SEC"] = str(GRACE_SEC)
    s.start()
    yield s
    s.stop()


def _client(stack: Stack, token: str) -> httpx.Client:
    assert stack.server is not None
    return httpx.Client(base_url=stack.server.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)


def _redis_pid(stack: Stack) -> int:
    return int((stack.dir / "redis.pid").read_text())


def _postmaster_pid(stack: Stack) -> int:
    return int((stack.dir / "pg" / "postmaster.pid").read_text().split()[0])


def _until_ready(stack: Stack, since: float, c: httpx.Client) -> tuple[float, list[int]]:
    """Poll /readyz until it answers 200 (seconds since `since`, and the statuses seen meanwhile); then an ingest
    must work at once."""
    assert stack.server is not None
    seen: list[int] = []
    while True:
        assert time.monotonic() - since < 120, ("never healed", seen, stack.server.log_path.read_text()[-3000:])
        try:
            seen.append(httpx.get(f"{stack.server.url}/readyz", timeout=5).status_code)
        except httpx.HTTPError:
            seen.append(0)
        if seen[-1] == 200:
            healed = time.monotonic() - since
            break
        time.sleep(0.1)
    r = c.post("/api/v1/ingest", json={"kind": "text", "text": "a note written after healing"})
    assert r.status_code == 200, r.text
    return healed, seen


def _log(stack: Stack) -> str:
    assert stack.server is not None
    return stack.server.log_path.read_text()


def test_a_second_serve_on_the_same_data_directory_refuses_and_leaves_the_first_be(stack: Stack) -> None:
    assert stack.server is not None and stack.server.proc is not None
    redis_pid, pg_pid = _redis_pid(stack), _postmaster_pid(stack)
    env = {**os.environ, "LEV_DATA_DIR": str(stack.dir), "HF_HUB_OFFLINE": "1"}
    started = time.monotonic()
    second = subprocess.run([sys.executable, "-m", "lev.cli", "serve", "--port", str(free_port())], env=env,
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    print(f"second lev serve refused after {took:.1f} s")
    assert second.returncode == 1, (second.returncode, second.stderr[-2000:])
    assert f"another `lev serve` (pid {stack.server.proc.pid}) is serving the data directory" in second.stderr
    assert took < 90  # before starting any server: its imports alone (55 s on a loaded CI machine)
    assert (_redis_pid(stack), _postmaster_pid(stack)) == (redis_pid, pg_pid)
    assert redis_running(stack.dir) and postgres_running(stack.dir)
    assert httpx.get(f"{stack.server.url}/readyz", timeout=10).status_code == 200


def test_kill_9_of_redis_is_healed_and_acknowledged_work_completes(stack: Stack, transcribe_stub: TranscribeStub,
                                                                  tmp_path: Path) -> None:
    token = stack.token("heal-redis@example.com", "w")
    c = _client(stack, token)
    transcribe_stub.delay("redis-speech.wav", 8)  # the job is waiting on its provider when Redis dies
    transcribe_stub.text("redis-speech.wav", "the recording survived a dead queue")
    _, r = upload(c, fm.make_wav(tmp_path / "redis-speech.wav", seconds=2.0), "audio/wav", auto_transform=False)
    assert r.status_code == 200 and r.json()["status"] == "transcribing", r.text
    media = r.json()["user_item_id"]
    r = c.post("/api/v1/ingest", json={"kind": "text", "text": big_text("queue"), "title": "queued"})
    assert r.status_code == 200 and r.json()["status"] == "processing", r.text
    queued = r.json()["user_item_id"]
    deadline = time.monotonic() + 60
    while not transcribe_stub.calls("redis-speech.wav"):
        assert time.monotonic() < deadline, "the transcription job never started"
        time.sleep(0.1)
    time.sleep(1.2)  # the append-only file is fsynced every second
    old = _redis_pid(stack)
    killed = time.monotonic()
    os.kill(old, signal.SIGKILL)
    healed, seen = _until_ready(stack, killed, c)
    print(f"Redis killed: /readyz green again after {healed:.1f} s (answers meanwhile: {seen})")
    assert healed < HEAL_WITHIN_SEC, (healed, seen)
    assert _redis_pid(stack) != old
    assert '"server": "redis"' in _log(stack) and "embedded server restarted" in _log(stack)
    after = c.post("/api/v1/ingest", json={"kind": "text", "text": big_text("after"), "title": "after"})
    assert after.status_code == 200, after.text
    items = wait_ready(c, [media, queued, after.json()["user_item_id"]], timeout=180)
    assert {i["status"] for i in items.values()} == {"ready"}, items
    assert items[media]["transcription_status"] == "done"
    assert "dead queue" in items[media]["transcript"]


def test_kill_9_of_postgres_is_healed_and_acknowledged_work_completes(stack: Stack) -> None:
    token = stack.token("heal-pg@example.com", "w")
    c = _client(stack, token)
    r = c.post("/api/v1/ingest", json={"kind": "text", "text": big_text("durable"), "title": "durable"})
    assert r.status_code == 200 and r.json()["status"] == "processing", r.text
    queued = r.json()["user_item_id"]
    old = _postmaster_pid(stack)
    killed = time.monotonic()
    os.kill(old, signal.SIGKILL)  # the postmaster alone, as the OOM killer picks one process
    healed, seen = _until_ready(stack, killed, c)
    print(f"PostgreSQL killed: /readyz green again after {healed:.1f} s (answers meanwhile: {seen})")
    assert healed < HEAL_WITHIN_SEC, (healed, seen)
    assert _postmaster_pid(stack) != old
    assert '"server": "postgres"' in _log(stack)
    items = wait_ready(c, [queued], timeout=180)
    assert items[queued]["status"] == "ready", items


def _pids_of_data_dir(data_dir: Path) -> list[int]:
    out = []
    for p in psutil.process_iter(["name", "cmdline", "cwd"]):
        info: dict[str, Any] = p.info
        text = " ".join(info.get("cmdline") or [])
        if str(data_dir) in text or (info.get("name") or "").startswith("redis-server") and info.get("cwd") == str(
                data_dir):
            out.append(p.pid)
    return out


def test_sigterm_stops_lev_and_its_servers_within_the_grace_period_while_redis_is_gone(
        stack: Stack, transcribe_stub: TranscribeStub, tmp_path: Path) -> None:
    assert stack.server is not None and stack.server.proc is not None
    token = stack.token("stop@example.com", "w")
    c = _client(stack, token)
    transcribe_stub.delay("long-speech.wav", 60)  # a job that would outlast the grace period
    _, r = upload(c, fm.make_wav(tmp_path / "long-speech.wav", seconds=2.0), "audio/wav", auto_transform=False)
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 60
    while not transcribe_stub.calls("long-speech.wav"):
        assert time.monotonic() < deadline, "the transcription job never started"
        time.sleep(0.1)
    proc = stack.server.proc
    os.kill(_redis_pid(stack), signal.SIGKILL)
    asked = time.monotonic()
    proc.send_signal(signal.SIGTERM)  # Redis is gone, and stays gone: no restarts while stopping
    try:
        proc.wait(GRACE_SEC + 30)
    finally:
        transcribe_stub.delay("long-speech.wav", 0)
    took = time.monotonic() - asked
    log = _log(stack)
    print(f"SIGTERM with Redis gone and a job running: exited after {took:.1f} s (grace {GRACE_SEC:g} s), "
          f"code {proc.returncode}")
    assert took <= GRACE_SEC + 5.0, (took, log[-3000:])  # the job alone would take 60 s; +5 s: a busy machine
    # Known defect (docs/decisions.md): on a loaded machine the shutdown can overrun the grace and the watchdog ends
    # the process (code 1, saying so); the bound above is what the issue promises, a clean exit is not yet reliable.
    watchdog = "overrunning LEV_SHUTDOWN_GRACE_SEC" in log
    assert (proc.returncode == 0 or (proc.returncode == 1 and watchdog)) and "Application shutdown failed" not in log, \
        (proc.returncode, log[-3000:])
    deadline = time.monotonic() + 15
    while redis_running(stack.dir) or postgres_running(stack.dir):  # the servers it started went with it
        assert time.monotonic() < deadline, _pids_of_data_dir(stack.dir)
        time.sleep(0.2)
    stack.server = None


def test_a_cut_handle_list_of_the_embedded_postgres_is_repaired_at_start(tmp_path: Path) -> None:
    """pgserver's list of the processes using its server is rewritten in place: a worker ended by the shutdown
    watchdog in the middle left it empty, and the next worker on the data directory failed at start (JSONDecodeError)
    instead of doing the durable jobs it was started for."""
    env = {k: v for k, v in os.environ.items() if k not in ("LEV_DATABASE_URL", "LEV_REDIS_URL")}
    env["LEV_DATA_DIR"] = str(tmp_path)

    def migrate() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lev.cli", "migrate"], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=180)

    assert migrate().returncode == 0
    handles = tmp_path / "pg" / HANDLE_LIST
    assert handles.read_text() == "[]" and not postgres_running(tmp_path)  # the last process out stopped it
    for cut in ("", "[12"):
        handles.write_text(cut)
        again = migrate()
        assert again.returncode == 0, again.stderr[-2000:]
        assert handles.read_text() == "[]" and not postgres_running(tmp_path)


def test_a_postmaster_pid_naming_another_process_by_now_does_not_keep_postgres_down(tmp_path: Path) -> None:
    """After a crash, postmaster.pid may name a pid that another process holds by now (pids wrap; a container's
    restart begins them again) or the dead postmaster not yet reaped. pgserver took such a process for the server,
    started nothing and every Lev process then failed at start (connection refused): the file is removed instead,
    and never while it names the running postmaster."""
    env = {k: v for k, v in os.environ.items() if k not in ("LEV_DATABASE_URL", "LEV_REDIS_URL")}
    env["LEV_DATA_DIR"] = str(tmp_path)

    def migrate() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lev.cli", "migrate"], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=180)

    assert migrate().returncode == 0
    pg = tmp_path / "pg"
    pid_file = pg / "postmaster.pid"
    assert postmaster_state(pg) == "none"
    ensure_postgres(tmp_path)  # this process uses it: the running postmaster's file is left alone
    try:
        kept = pid_file.read_text()
        assert postmaster_state(pg) == "running" and not clear_stale_pid_file(pg) and pid_file.read_text() == kept
    finally:
        release_postgres(tmp_path)
        stop_server(tmp_path)
    other = subprocess.Popen(["sleep", "60"])  # a live process the pid now belongs to
    dead = subprocess.Popen(["sleep", "60"])
    dead.kill()  # a zombie until waited for, as a killed postmaster is until its parent reaps it
    try:
        while psutil.Process(dead.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.05)
        for holder in (other.pid, dead.pid):
            pid_file.write_text(f"{holder}\n{pg}\n{int(time.time()) - 3600}\n5432\n{pg}\n\n  5432001         1\n"
                                "ready   \n")
            assert postmaster_state(pg) == "stale" and not postgres_running(tmp_path)
            again = migrate()
            assert again.returncode == 0, again.stderr[-2000:]
            assert not postgres_running(tmp_path) and not pid_file.exists()  # started, then stopped by the last one out
    finally:
        other.kill()
        other.wait()
        dead.wait()
