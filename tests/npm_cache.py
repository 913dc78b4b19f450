"""Pinned npm packages the tests use (MCP Inspector, axe-core, the MCP Apps host: the official ext-apps AppBridge and
esbuild to bundle it; the MCP conformance suite and the Node it needs), installed from the npm registry into the
checkout's `.cache/` (never committed) by `make node-deps` (`python -m tests.npm_cache`, part of `make test`) or on
first use; later runs reuse them."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.stack import ROOT

CACHE = ROOT / ".cache"


# Every pinned set: the `.cache/` folder it is installed into and its exact versions (the first names the folder's
# main package).
PINNED: dict[str, tuple[str, ...]] = {
    "inspector-2.12.0": ("@modelcontextprotocol/inspector@2.12.0",),
    "axe-core-4.14.1": ("axe-core@4.14.1",),
    "ext-apps-2.0.4": ("@modelcontextprotocol/ext-apps@2.0.4", "@modelcontextprotocol/client@2.4.0",
                       "@modelcontextprotocol/core@2.4.0", "zod@4.6.7", "esbuild@0.25.12"),
    # The MCP conformance suite runs on Node 22 (it imports fs.globSync), pinned from npm beside it.
    "conformance-0.1.16": ("@modelcontextprotocol/conformance@0.1.16", "node@22.23.3"),
}


def npm_package(spec: str, name: str, *also: str) -> Path:
    """The installed package directory of `spec` (e.g. "axe-core@4.14.1"), installed with the pinned `also` into
    `.cache/<name>/` on first use (into a fresh directory, then moved into place, so a parallel run never sees half
    an install)."""
    home = CACHE / name
    package = home / "node_modules" / spec.rsplit("@", 1)[0]
    if not package.exists():
        npm = shutil.which("npm")
        assert npm, f"{spec} is installed with npm: Node.js and npm must be on PATH"
        CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=CACHE))
        subprocess.run([npm, "install", "--prefix", str(staging), "--no-save", "--no-audit", "--no-fund",
                        "--loglevel=error", spec, *also], check=True, timeout=300, capture_output=True)
        try:
            staging.rename(home)
        except OSError:  # another run installed it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    return package


def main() -> None:
    """Install every pinned set that is not installed yet (`make node-deps`)."""
    for name, (spec, *also) in PINNED.items():
        print(npm_package(spec, name, *also))


if __name__ == "__main__":
    main()
