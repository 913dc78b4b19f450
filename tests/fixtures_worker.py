"""A private Lev whose jobs run in a separate `lev worker` process that a test kills with SIGKILL and starts again:
its own data dir (embedded PostgreSQL and Redis), `lev serve --no-workers-inline`, tokens minted in-process and
SQL on the database's socket."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
import redis

from lev.embedded import redis_socket_path, stop_redis
from tests.stack import ROOT, LiveServer, mint_token


class SplitStack:
    def __init__(self, env: dict[str, str]) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="levsplit-", dir="/tmp"))
        self.env = {"LEV_RATE_LIMITS": "off", "LEV_SHUTDOWN_GRACE_SEC": "2", "LEV_WORKER_HEARTBEAT_SEC": "1", **env}
        self.server = LiveServer(self.dir, self.env, log_name="server", args=["--no-workers-inline"]).start(300)
        self.worker: subprocess.Popen[bytes] | None = None
        self.lives = 0

    def start_worker(self) -> None:
        self.lives += 1
        log = open(self.dir / f"worker{self.lives}.log", "wb")
        self.worker = subprocess.Popen([sys.executable, "-m", "lev.cli", "worker"], env=self.server.env, cwd=ROOT,
                                       stdout=log, stderr=subprocess.STDOUT)

    def kill_worker(self) -> None:
        """SIGKILL: no clean shutdown, no job handed back."""
        assert self.worker is not None
        self.worker.send_signal(signal.SIGKILL)
        self.worker.wait(30)
        self.worker = None

    def stop_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.worker.send_signal(signal.SIGTERM)
            try:
                self.worker.wait(30)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait()
        self.worker = None

    def _socket(self) -> str:
        return (self.dir / "pg" / "postmaster.pid").read_text().splitlines()[4]

    def sql(self, statement: str, **params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(dbname="lev", user="postgres", host=self._socket()) as conn:
            cur = conn.execute(statement, params)
            return list(cur.fetchall()) if cur.description else []

    def token(self, email: str, *, write: bool = True) -> str:
        return mint_token(f"postgresql+psycopg://postgres@/lev?host={self._socket()}", email, write=write)

    def redis(self) -> Any:
        return redis.Redis(unix_socket_path=str(redis_socket_path(self.dir)))

    def close(self) -> None:
        self.stop_worker()
        self.server.stop()
        stop_redis(self.dir)
        pid_file = self.dir / "pg" / "postmaster.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
            except ProcessLookupError:
                pass
        time.sleep(1)
        shutil.rmtree(self.dir, ignore_errors=True)
