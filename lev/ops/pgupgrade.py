"""`lev db upgrade`: the embedded data directory moved to the newest PostgreSQL major the package ships.

The command (`lev.cli`) refuses while anything runs on the directory, takes a `lev backup` first (the way back),
stops the old server and calls `move` here: `pg_upgrade` (copy mode) from the old major's binaries into a new
cluster beside the old one, data checksums switched on (a new directory's default), then the new cluster put in
place of the old, which is removed. Everything runs as the server's own user (`pgserver` when Lev runs as root).
Nothing touches the old cluster until pg_upgrade has succeeded: a failure leaves the directory as it was.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg

from lev import embedded
from lev.core import clock


class UpgradeError(RuntimeError):
    """An upgrade that cannot proceed; the message says why and what to do."""


@dataclass(frozen=True)
class Locale:
    """The old cluster's encoding and locale, which the new one must have for pg_upgrade."""

    encoding: str
    collate: str
    ctype: str


def target() -> int:
    return max(embedded.MAJORS)


def refuse_if_running(data_dir: Path) -> None:
    """Raise UpgradeError naming what runs on the data directory: `lev serve`, or any process using its
    PostgreSQL (a worker, a CLI command), or the server itself."""
    serving = embedded.data_dir_server(data_dir)
    if serving is not None:
        raise UpgradeError(f"`lev serve` (pid {serving}) is serving {data_dir}: stop it first (Ctrl-C or SIGTERM), "
                           "then run `lev db upgrade` again")
    users = [p for p in embedded.postgres_users(data_dir) if p != os.getpid() and psutil.pid_exists(p)]
    if users or embedded.postgres_running(data_dir):
        who = f" (used by pid {', '.join(map(str, users))})" if users else ""
        raise UpgradeError(f"the embedded PostgreSQL of {data_dir} is running{who}: stop every Lev process on this "
                           "data directory first, then run `lev db upgrade` again")


def locale_of(url: str) -> Locale:
    """The running old cluster's encoding and locale (template0's: what initdb gave it)."""
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        row = conn.execute("SELECT pg_encoding_to_char(encoding), datcollate, datctype FROM pg_database"
                           " WHERE datname = 'template0'").fetchone()
    assert row is not None
    return Locale(*row)


def _wait_stopped(data_dir: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while embedded.postgres_running(data_dir) or (data_dir / "pg" / "postmaster.pid").exists():
        if time.monotonic() > deadline:
            raise UpgradeError("the embedded PostgreSQL did not stop after the backup; nothing was changed")
        time.sleep(0.2)


def _user() -> str | None:
    """The system user the package runs PostgreSQL as: `pgserver` when this process is root, else this one."""
    return "pgserver" if os.geteuid() == 0 else None


def _own(path: Path, user: str | None) -> None:
    path.mkdir(mode=0o700, exist_ok=True)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _run(cmd: list[str], user: str | None, cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, user=user)
    if done.returncode != 0:
        out = (done.stdout + done.stderr).strip()[-3000:]
        raise UpgradeError(f"{Path(cmd[0]).name} failed (the data directory is unchanged): {out}")


def move(data_dir: Path, locale: Locale) -> int:
    """pg_upgrade the stopped embedded cluster to `target()`; returns the old major. The old cluster is removed
    once the new one is in its place."""
    data_dir = data_dir.resolve()
    old = embedded.pg_major(data_dir)
    new = target()
    if old is None or old >= new:
        raise UpgradeError(f"nothing to upgrade in {data_dir} (PostgreSQL {old})")
    pg = data_dir / "pg"
    staged, work = data_dir / f"pg-{new}.new", data_dir / "pg-upgrade"
    for leftover in (staged, work):  # an earlier attempt that failed
        shutil.rmtree(leftover, ignore_errors=True)
    user = _user()
    _own(staged, user)
    _own(work, user)  # pg_upgrade writes its logs and scripts in its working directory
    sockets = Path(tempfile.mkdtemp(prefix="lev-pgu-"))  # short: a socket's path has at most 107 bytes
    _own(sockets, user)
    _run([str(embedded.pg_bin("initdb", new)), "-D", str(staged), "-U", "postgres", "--auth=trust",
          f"--encoding={locale.encoding}", f"--lc-collate={locale.collate}", f"--lc-ctype={locale.ctype}",
          "--no-data-checksums"], user, work)  # as the old cluster: pgserver made it without checksums
    _run([str(embedded.pg_bin("pg_upgrade", new)), "--old-bindir", str(embedded.pg_bin("", old)),
          "--new-bindir", str(embedded.pg_bin("", new)), "--old-datadir", str(pg), "--new-datadir", str(staged),
          "--username", "postgres", "--socketdir", str(sockets), "--copy"], user, work)
    _run([str(embedded.pg_bin("pg_checksums", new)), "--enable", "-D", str(staged)], user, work)
    retired = data_dir / f"pg-{old}.old"
    shutil.rmtree(retired, ignore_errors=True)
    pg.rename(retired)
    staged.rename(pg)
    shutil.rmtree(retired, ignore_errors=True)
    for scratch in (work, sockets):
        shutil.rmtree(scratch, ignore_errors=True)
    return old


def upgrade(data_dir: Path, backup_dir: Path | None, take_backup: Callable[[Path], dict[str, Any]],
            counts_after: Callable[[], dict[str, int]], say: Callable[[str], None]) -> None:
    """The whole `lev db upgrade`: refusals, the backup (`take_backup(path)` returns its manifest), the move, then
    the new cluster started, migrated and its row counts (`counts_after()`) checked against the backup's."""
    data_dir, new = data_dir.resolve(), target()
    old = embedded.pg_major(data_dir)
    if old is None:
        raise UpgradeError(f"{data_dir} has no embedded database yet (a new one starts on PostgreSQL {new})")
    if old >= new:
        say(f"{data_dir} is on PostgreSQL {old} already: nothing to do")
        return
    refuse_if_running(data_dir)
    lock = embedded.claim_data_dir(data_dir)  # no `lev serve` starts on it meanwhile
    try:
        stamp = clock.now().strftime("%Y%m%dT%H%M%SZ")
        backup = (backup_dir or data_dir / "backups" / f"before-postgresql-{new}-{stamp}").resolve()
        say(f"1/3 backing up {data_dir} (PostgreSQL {old}) to {backup}")
        manifest = take_backup(backup)
        url = embedded.running_postgres_url(data_dir)
        if url is None:
            raise UpgradeError("the embedded PostgreSQL stopped during the backup; nothing was changed")
        locale = locale_of(url)
        embedded.release_postgres(data_dir)  # this process was its last user: the server is asked to stop
        _wait_stopped(data_dir)
        say(f"2/3 upgrading to PostgreSQL {new} (pg_upgrade)")
        try:
            move(data_dir, locale)
        except UpgradeError as exc:
            raise UpgradeError(f"{exc}\nThe backup is in {backup}") from None
        say(f"3/3 starting PostgreSQL {new} and checking its rows against the backup's")
        counts = counts_after()
    finally:
        lock.release()
    wrong = {t: (n, counts.get(t)) for t, n in manifest["counts"].items() if counts.get(t) != n}
    if wrong:
        raise UpgradeError(f"row counts differ after the upgrade (backup, now): {wrong}; the backup is in {backup}")
    say(f"{data_dir} is on PostgreSQL {new}. The way back is the backup: `lev restore {backup}` with LEV_DATA_DIR "
        "set to an empty directory. Delete it when you no longer need it.")
