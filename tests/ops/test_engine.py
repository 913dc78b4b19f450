"""The embedded engine (issue 49): a data directory of the release before it (pgserver 0.1.4: PostgreSQL 16.2,
pgvector 0.6.2) opens on the new package with nothing done by hand, and keeps every row, vector, index and answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lev.embedded import (
    MAJORS,
    NEW_MAJOR,
    claim_data_dir,
    ensure_postgres,
    pg_major,
    postgres_running,
    release_postgres,
)
from tests.old_engine import ROOT, stop_server


def embedded_env(data_dir: Path) -> dict[str, str]:
    """A Lev process's environment on the embedded stack of `data_dir`."""
    env = {k: v for k, v in os.environ.items() if k not in ("LEV_DATABASE_URL", "LEV_REDIS_URL")}
    return {**env, "LEV_DATA_DIR": str(data_dir)}


def lev(data_dir: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lev.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env=embedded_env(data_dir), timeout=timeout)


def _helper(command: str, data_dir: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "tests.old_engine", command, str(data_dir)], cwd=ROOT,
                          env=embedded_env(data_dir), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    facts: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return facts


@pytest.fixture(scope="module")
def old_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The old engine's data directory (tarred, so that each test unpacks its own copy) and its facts."""
    where = tmp_path_factory.mktemp("old-engine")
    facts = _helper("build", where / "data")
    assert (facts["server"], facts["pgvector"], facts["migration"]) == ("16.2", "0.6.2", "0021"), facts
    archive = where / "old.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(where / "data", arcname="data")
    shutil.rmtree(where / "data")
    yield archive, facts


def unpack(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="fully_trusted")  # ownership kept: the old server's files are its user's
    return into / "data"


# Indexes a later migration replaced on purpose (the name and the migration that did): every other index of the
# old directory is kept exactly as it was.
REPLACED_INDEXES = {"webhook_deliveries_due": "0024"}  # by webhook_deliveries_pending (per endpoint, then time)


def kept_indexes_changed(before: list[list[Any]], after: list[list[Any]]) -> list[list[Any]]:
    """The old directory's indexes missing or changed after the migrations, but those replaced on purpose (whose
    replacements must be there)."""
    names = {i[0] for i in after}
    assert "webhook_deliveries_pending" in names
    return [i for i in before if i not in after and i[0] not in REPLACED_INDEXES]


def test_an_old_data_directory_opens_on_the_new_engine_with_everything_in_it(
        old_dir: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    archive, before = old_dir
    data = unpack(archive, tmp_path)
    migrate = lev(data, "migrate")
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    assert pg_major(data) == 16  # kept on its major: `lev db upgrade` moves it, never a start
    after = _helper("facts", data)
    assert after["server"].startswith("16.") and after["server"] != "16.2", after["server"]  # the package's 16
    assert tuple(map(int, after["pgvector"].split("."))) >= (0, 8, 4), after["pgvector"]  # ALTER EXTENSION UPDATE
    for key in ("counts", "vectors", "vector_digest", "walk", "search"):
        assert after[key] == before[key], key
    assert not kept_indexes_changed(before["indexes"], after["indexes"])
    assert before["counts"]["chunks"] >= 40 and all(valid and ready for _, valid, ready, _ in after["indexes"])
    assert any("USING hnsw" in d for *_, d in after["indexes"])
    stop_server(data)


def test_a_new_data_directory_starts_on_the_newer_major(admin: Any, data_dir: Path) -> None:
    assert pg_major(data_dir) == NEW_MAJOR == max(MAJORS)
    assert admin.sql("SHOW server_version_num")[0][0].startswith(str(NEW_MAJOR))
    version = admin.sql("SELECT extversion FROM pg_extension WHERE extname = 'vector'")[0][0]
    assert tuple(map(int, version.split("."))) >= (0, 8, 4)


def test_lev_db_upgrade_moves_an_old_directory_to_the_newer_major_after_a_backup(
        old_dir: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """`lev db upgrade` (run as root here, as the sessions and CI are): a backup first, pg_upgrade, then the same
    rows, vectors, indexes and answers on PostgreSQL 18; a second run has nothing to do; the backup restores into
    an empty data directory (the way back)."""
    archive, before = old_dir
    data = unpack(archive, tmp_path)
    backup = tmp_path / "before-18"
    done = lev(data, "db", "upgrade", "--backup", str(backup), timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert pg_major(data) == NEW_MAJOR and not postgres_running(data)
    assert sorted(p.name for p in data.iterdir() if p.name.startswith("pg")) == ["pg"]  # no old cluster left
    manifest = json.loads((backup / "manifest.json").read_text())
    assert manifest["migration"] == "0021"  # the directory as it was
    both = manifest["counts"].keys() & before["counts"].keys()
    assert len(both) >= 6 and all(manifest["counts"][t] == before["counts"][t] for t in both)
    after = _helper("facts", data)
    assert after["server"].startswith(f"{NEW_MAJOR}.") and after["pgvector"] == before_new_pgvector(after)
    for key in ("counts", "vectors", "vector_digest", "walk", "search"):
        assert after[key] == before[key], key
    assert not kept_indexes_changed(before["indexes"], after["indexes"])
    stop_server(data)
    again = lev(data, "db", "upgrade")
    assert again.returncode == 0 and "nothing to do" in again.stderr, again.stderr[-2000:]
    back = tmp_path / "restored"
    restored = lev(back, "restore", str(backup))
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert _helper("facts", back)["counts"] == before["counts"]
    stop_server(back)


def before_new_pgvector(after: dict[str, Any]) -> str:
    assert tuple(map(int, after["pgvector"].split("."))) >= (0, 8, 4), after["pgvector"]
    return str(after["pgvector"])


def test_lev_db_upgrade_refuses_while_lev_runs_on_the_directory(old_dir: tuple[Path, dict[str, Any]],
                                                                 tmp_path: Path) -> None:
    archive, _ = old_dir
    data = unpack(archive, tmp_path)
    lock = claim_data_dir(data)  # what `lev serve` holds
    try:
        busy = lev(data, "db", "upgrade")
    finally:
        lock.release()
    assert busy.returncode == 1 and f"`lev serve` (pid {os.getpid()}) is serving" in busy.stderr, busy.stderr
    ensure_postgres(data)  # a process using its PostgreSQL (a worker, a CLI command)
    try:
        running = lev(data, "db", "upgrade")
    finally:
        release_postgres(data)
        stop_server(data)
    assert running.returncode == 1 and f"is running (used by pid {os.getpid()})" in running.stderr, running.stderr
    assert pg_major(data) == 16 and not (data / "backups").exists()  # nothing changed, no backup taken
    external = subprocess.run([sys.executable, "-m", "lev.cli", "db", "upgrade"], cwd=ROOT, capture_output=True,
                              text=True, env={**embedded_env(data), "LEV_DATABASE_URL": "postgresql://x@/lev"})
    assert external.returncode == 1 and "embedded data directory only" in external.stderr, external.stderr
