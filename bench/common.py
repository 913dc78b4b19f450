"""Shared benchmark plumbing: a fresh Lev on its own embedded stack, a token, percentiles, machine facts."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.stack import Admin, LiveServer, new_user

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = Path(os.environ.get("LEV_BENCH_SCIFACT", ROOT.parent / "shared" / "bench" / "scifact"))


@dataclass
class Lev:
    """A running Lev with one pro user and a whole-library write token (no write cap)."""

    server: LiveServer
    admin: Admin
    token: str
    user_id: Any
    data_dir: Path

    @property
    def url(self) -> str:
        return self.server.url

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def stop(self) -> None:
        from lev.embedded import stop_redis

        self.server.stop()
        self.admin.close()
        stop_redis(self.data_dir)


def migration_head(root: Path) -> str:
    """The newest migration the checkout at `root` knows (read from its files: that code is not importable here)."""
    revisions, downs = set(), set()
    for f in (root / "store" / "migrations" / "versions").glob("*.py"):
        text = f.read_text()
        rev = re.search(r'^revision = "([^"]+)"', text, re.M)
        down = re.search(r'^down_revision = "([^"]+)"', text, re.M)
        if rev:
            revisions.add(rev.group(1))
        if down:
            downs.add(down.group(1))
    (head,) = revisions - downs
    return head


@contextmanager
def schema_seen_by(admin: Admin, root: Path) -> Iterator[None]:
    """Start an older checkout's server on this checkout's (newer, additive) schema: while it starts, the database
    says it is at the old code's newest migration, so its start-up `alembic upgrade head` has nothing to do instead
    of failing on a revision it does not know. The true revision is written back before anything else starts."""
    if root == ROOT:
        yield
        return
    current = admin.sql("SELECT version_num FROM alembic_version")[0][0]
    admin.sql("UPDATE alembic_version SET version_num = :v", v=migration_head(root))
    try:
        yield
    finally:
        admin.sql("UPDATE alembic_version SET version_num = :v", v=current)


def own_python(root: Path) -> str:
    """The interpreter that runs the checkout at `root`: this one for this checkout; for another (an old commit's
    `git archive`) the virtualenv its own Makefile builds (`make .venv/.installed`, from pip's warm cache), so it
    runs with its own dependencies (before issue 33: torch)."""
    if root.resolve() == ROOT.resolve():
        return sys.executable
    if not (root / ".venv" / ".installed").exists():
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        subprocess.run(["make", ".venv/.installed"], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
    return str(root / ".venv" / "bin" / "python")


def start_lev(env: dict[str, str] | None = None, root: Path = ROOT, python: str = sys.executable,
              args: list[str] | None = None) -> Lev:
    """Start `lev serve` (of the checkout at `root`, run by `python`, with more options `args`) on a fresh data dir
    with the hourly limits off (unless `env` says otherwise)."""
    from lev.embedded import resolve_urls
    from lev.store import db

    data_dir = Path(tempfile.mkdtemp(prefix="levbench-", dir="/tmp"))
    os.environ["LEV_DATA_DIR"] = str(data_dir)
    db_url, _ = resolve_urls(None, None, data_dir)
    db.migrate(db_url)
    admin = Admin(db_url)
    with schema_seen_by(admin, root):
        server = LiveServer(data_dir, {"LEV_RATE_LIMITS": "off", "LEV_ALLOW_PRIVATE_URLS": "true", **(env or {})},
                            log_name="bench", root=root, python=python, args=args).start(timeout=300)
    user = new_user(admin)
    token = user.token(write=True, write_cap=0, kb_only=True, name="bench")
    return Lev(server, admin, token, user.id, data_dir)


def cleanup(lev: Lev) -> None:
    """Stop the servers; the data dir (with the server log) is kept when LEV_BENCH_KEEP is set."""
    lev.stop()
    if not os.environ.get("LEV_BENCH_KEEP"):
        shutil.rmtree(lev.data_dir, ignore_errors=True)


def old_tree_at(commit: str) -> Path:
    """An old commit's sources (git archive), cached per commit."""
    sha = subprocess.run(["git", "rev-parse", "--short", commit], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    dest = Path(tempfile.gettempdir()) / f"lev-bench-old-{sha}"
    if not (dest / "lev" / "app.py").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def pct(values: list[float]) -> dict[str, float]:
    """p50/p95/p99 (and count) of a list of milliseconds."""
    a = np.asarray(values, dtype=float)
    return {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "p99": float(np.percentile(a, 99))}


def fmt_pct(p: dict[str, float]) -> str:
    return f"{p['p50']:.1f} / {p['p95']:.1f} / {p['p99']:.1f}"


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores ({cpu}), {mem} RAM, Python {platform.python_version()}"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"
