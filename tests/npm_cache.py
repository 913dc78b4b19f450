"""Pinned npm packages the tests use (MCP Inspector, axe-core), installed on first use from the npm registry into
the checkout's `.cache/` (never committed); later runs reuse them."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.stack import ROOT

CACHE = ROOT / ".cache"


def npm_package(spec: str, name: str) -> Path:
    """The installed package directory of `spec` (e.g. "axe-core@4.14.1"), installed into `.cache/<name>/` on first
    use (into a fresh directory, then moved into place, so a parallel run never sees half an install)."""
    home = CACHE / name
    package = home / "node_modules" / spec.rsplit("@", 1)[0]
    if not package.exists():
        npm = shutil.which("npm")
        assert npm, f"{spec} is installed with npm: Node.js and npm must be on PATH"
        CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=CACHE))
        subprocess.run([npm, "install", "--prefix", str(staging), "--no-save", "--no-audit", "--no-fund",
                        "--loglevel=error", spec], check=True, timeout=300, capture_output=True)
        try:
            staging.rename(home)
        except OSError:  # another run installed it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    return package
