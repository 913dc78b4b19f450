"""The one build step pyproject.toml cannot say: the wheel ships the browser extension as `lev/extension.zip`,
zipped from `extension/` (served as `GET /extension.zip`, so a user of the wheel has it without the repository)."""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lev.core.packagedata import EXTENSION_ZIP, zip_folder  # noqa: E402  (stdlib only, importable before install)


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if not self.dry_run:
            (Path(self.build_lib) / "lev" / EXTENSION_ZIP).write_bytes(zip_folder(HERE / "extension"))


setup(cmdclass={"build_py": BuildPy})
