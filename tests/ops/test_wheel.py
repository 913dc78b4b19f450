"""Issue 33: the wheel serves from anywhere. `pip wheel .` of the project's files, installed into a fresh venv, run
as `lev serve` from an empty directory outside the checkout: REST with its spec, MCP with its tool declarations,
the pages with their static files, migrations, the embedded PostgreSQL and Redis, the bundled embedding model.
Nothing of the checkout is on the path; the installed import names are `lev` alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from lev.core.contract import load_spec, mcp_tools
from lev.core.packagedata import zip_folder
from tests.stack import ROOT, free_port

# What `git ls-files` would hand `pip wheel .` from a clean clone (the links in lev/ copied as links).
PROJECT = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "lev", "store", "handlers", "tasks", "web",
           "extension", "openapi.yaml", "mcp_tools.json")
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str], timeout: float = 900) -> str:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


UV = Path(sys.executable).parent / "uv"  # the pinned uv `make` installs; `uv tool install` installs the same way
MAX_INSTALLED_MIB = 750


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the built wheel and its dependencies (from uv's cache when warm), nothing of the checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in PROJECT:
        from_ = ROOT / name
        if from_.is_dir() and not from_.is_symlink():
            shutil.copytree(from_, src / name, symlinks=True, ignore=JUNK)
        else:
            shutil.copy2(from_, src / name, follow_symlinks=False)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _run(sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--disable-pip-version-check", "-w", tmp / "dist",
         cwd=src, env=env)
    [wheel] = (tmp / "dist").glob("lev-*.whl")
    venv = tmp / "venv"
    _run(UV, "venv", "--quiet", "--python", sys.executable, venv, cwd=tmp, env=env)
    _run(UV, "pip", "install", "--quiet", "--python", venv / "bin" / "python", wheel, cwd=tmp, env=env)
    return venv


def test_the_installed_wheel_fits_in_750_mib(installed: Path) -> None:
    """Issues 43 and 49: the install is at most 750 MiB (the headless OpenCV build, no ffmpeg; PostgreSQL 16 and 18
    with pgvector), as `du` counts the venv a fresh `uv tool install` of the wheel makes (bytecode is written later,
    for the modules a process imports)."""
    du = subprocess.run(["du", "-s", "--block-size=1M", str(installed)], capture_output=True, text=True, check=True)
    mib = int(du.stdout.split()[0])
    print(f"installed size of the wheel's venv: {mib} MiB")
    assert mib <= MAX_INSTALLED_MIB, mib
    [site] = (installed / "lib").glob("python3*/site-packages")
    for heavy in ("imageio_ffmpeg", "opencv_python.libs", "torch"):  # ffmpeg, OpenCV's Qt GUI build, torch
        assert not (site / heavy).exists(), heavy


def test_the_wheel_installs_only_the_lev_name_with_its_files(installed: Path) -> None:
    [site] = (installed / "lib").glob("python3*/site-packages")
    for collider in ("store", "handlers", "tasks", "web"):
        assert not (site / collider).exists(), f"the wheel installed a top-level {collider}"
    lev = site / "lev"
    for part in ("openapi.yaml", "mcp_tools.json", "web/templates", "web/static/redoc/redoc.standalone.js",
                 "store/migrations/env.py", "store/migrations/versions", "embedding/model/tokenizer.json",
                 "handlers/pages.py", "tasks/worker.py"):
        assert (lev / part).exists() and not (lev / part).is_symlink(), part
    assert (lev / "openapi.yaml").read_text() == (ROOT / "openapi.yaml").read_text()
    # the browser extension, zipped from extension/ when the wheel was built (a wheel's user has no repository)
    assert (lev / "extension.zip").read_bytes() == zip_folder(ROOT / "extension")


def test_the_installed_wheel_serves_from_an_empty_directory(installed: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "anywhere"
    cwd.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEV_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"LEV_BASE_URL": base, "PATH": f"{installed / 'bin'}:{env.get('PATH', '')}"}
    lev = installed / "bin" / "lev"
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen([str(lev), "serve", "--port", str(port)], cwd=cwd, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-4000:]
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-4000:]
            time.sleep(0.5)
        where = _run(installed / "bin" / "python", "-c", "import lev; print(lev.__file__)", cwd=cwd, env=env)
        assert where.startswith(str(installed)), where
        assert (cwd / ".lev").is_dir()  # the data directory is the working directory's, the code is the venv's

        spec = httpx.get(f"{base}/api/v1/openapi.json", timeout=30)
        assert spec.status_code == 200 and spec.json()["paths"].keys() == load_spec()["paths"].keys()
        assert httpx.get(f"{base}/api/v1/docs/redoc.standalone.js", timeout=30).status_code == 200
        page = httpx.get(f"{base}/login", timeout=30)
        assert page.status_code == 200 and "<form" in page.text
        assert '/static/lev.css' in page.text and httpx.get(f"{base}/static/lev.css", timeout=30).status_code == 200
        assert httpx.get(f"{base}/extension.zip", timeout=30).content == zip_folder(ROOT / "extension")

        _run(lev, "user", "create", "wheel@example.com", "--tier", "pro", cwd=cwd, env=env, timeout=120)
        token = _run(lev, "token", "create", "--user", "wheel@example.com", "--name", "wheel", "--write",
                     cwd=cwd, env=env, timeout=120).strip()
        bearer = {"Authorization": f"Bearer {token}"}
        added = httpx.post(f"{base}/api/v1/ingest", headers=bearer, timeout=120, json={
            "kind": "text", "title": "Wheel note", "text": "Axolotls regrow their limbs, hearts and spinal cords."})
        assert added.status_code == 200, added.text
        hits = httpx.get(f"{base}/api/v1/search", headers=bearer, timeout=120,
                         params={"q": "which animal regenerates a spinal cord", "mode": "semantic"})
        assert hits.status_code == 200 and hits.json()["results"][0]["title"] == "Wheel note", hits.text

        mcp = httpx.post(f"{base}/api/mcp", timeout=60, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         headers={**bearer, "Accept": "application/json, text/event-stream"})
        assert mcp.status_code == 200, mcp.text
        listed = mcp.json()["result"]["tools"] if mcp.headers["content-type"].startswith("application/json") else \
            json.loads(mcp.text.split("data:", 1)[1])["result"]["tools"]
        assert sorted(t["name"] for t in listed) == sorted(t["name"] for t in mcp_tools()["tools"])
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
