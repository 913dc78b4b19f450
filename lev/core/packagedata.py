"""The release (`VERSION`, as pyproject.toml says) and the files Lev ships inside its package (the REST contract,
the MCP tool declarations, the pages' templates and static files, the migrations, the embedding model), found
through `importlib.resources`: never through the working directory, so an installed wheel serves from anywhere. In
the repository `lev/openapi.yaml`, `lev/web` and the `lev/store`, `lev/handlers`, `lev/tasks` packages are links
to the top-level files and folders."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

VERSION = "0.1.0"  # pyproject.toml's version (tests/test_architecture.py holds them together)


def packaged(*parts: str) -> Path:
    """A file or folder of the installed `lev` package (a wheel installs as plain files, so this is a real path)."""
    return Path(str(files("lev").joinpath(*parts)))
