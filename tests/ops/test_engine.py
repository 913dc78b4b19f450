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

from lev.embedded import MAJORS, NEW_MAJOR, pg_major
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
    for key in ("counts", "vectors", "vector_digest", "indexes", "walk", "search"):
        assert after[key] == before[key], key
    assert before["counts"]["chunks"] >= 40 and all(valid and ready for _, valid, ready, _ in after["indexes"])
    assert any("USING hnsw" in d for *_, d in after["indexes"])
    stop_server(data)


def test_a_new_data_directory_starts_on_the_newer_major(admin: Any, data_dir: Path) -> None:
    assert pg_major(data_dir) == NEW_MAJOR == max(MAJORS)
    assert admin.sql("SHOW server_version_num")[0][0].startswith(str(NEW_MAJOR))
    version = admin.sql("SELECT extversion FROM pg_extension WHERE extname = 'vector'")[0][0]
    assert tuple(map(int, version.split("."))) >= (0, 8, 4)
