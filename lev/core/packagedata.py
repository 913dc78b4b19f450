"""The release (`VERSION`, as pyproject.toml says) and the files Lev ships inside its package (the REST contract,
the MCP tool declarations, the pages' templates and static files, the migrations, the embedding model, and the
browser extension as `extension.zip`, zipped from `extension/` when the wheel is built: setup.py), found through
`importlib.resources`: never through the working directory, so an installed wheel serves from anywhere. In the
repository `lev/openapi.yaml`, `lev/web` and the `lev/store`, `lev/handlers`, `lev/tasks` packages are links to the
top-level files and folders. Stdlib only: the wheel's build imports it."""

from __future__ import annotations

import io
import zipfile
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

VERSION = "0.1.0"  # pyproject.toml's version (tests/test_architecture.py holds them together)


def packaged(*parts: str) -> Path:
    """A file or folder of the installed `lev` package (a wheel installs as plain files, so this is a real path)."""
    return Path(str(files("lev").joinpath(*parts)))


EXTENSION_ZIP = "extension.zip"
_ZIP_TIME = (2026, 1, 1, 0, 0, 0)  # every entry's time: the same folder always zips to the same bytes


EXTENSION_TOP = "lev-extension"  # the folder the zip unpacks into (issue 51: never loose files in the current one)


def zip_folder(folder: Path, top: str = EXTENSION_TOP) -> bytes:
    """`folder`'s files as a zip under one top folder `top`: unzipped, that folder is what "Load unpacked" takes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            entry = zipfile.ZipInfo(f"{top}/{path.relative_to(folder).as_posix()}", _ZIP_TIME)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, path.read_bytes())
    return out.getvalue()


@lru_cache(maxsize=1)
def extension_zip() -> bytes:
    """The browser extension (`GET /extension.zip`): the one the wheel ships, else (a checkout, `make run`) the
    repository's `extension/` zipped now the same way."""
    shipped = packaged(EXTENSION_ZIP)
    if shipped.is_file():
        return shipped.read_bytes()
    return zip_folder(packaged().parent / "extension")
