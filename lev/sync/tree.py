"""The local folder `lev sync` mirrors: its files of the types Lev keeps (by name, as a ZIP's members are typed), each
with its path under the Lev folder (`NAME/Projects/plan.md`) and the SHA-256 of its bytes, and the sync's memory
between runs (a small JSON file in the user's cache folder): the hashes of files unchanged since (same size and
modification time, so a second run reads no file again) and the files the server refused (not sent again until
they change).

Hidden files and folders (`.obsidian/`, `.git/`), symbolic links, devices, FIFOs and sockets are never read."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lev.core import sourcepath
from lev.core.mimes import mime_for_name

STATE_VERSION = 1
SYSTEM_NAMES = {"__macosx", "thumbs.db", "desktop.ini"}


@dataclass(frozen=True)
class LocalFile:
    rel: str  # its path under the synced folder, `/`-separated
    path: Path
    size: int
    mtime_ns: int
    mime: str


@dataclass
class Scan:
    files: dict[str, LocalFile] = field(default_factory=dict)  # by `rel`
    present: set[str] = field(default_factory=set)  # every regular file's `rel` (those Lev keeps or not)
    skipped: int = 0  # regular files Lev keeps no type of, or whose path it cannot keep


def _hidden(name: str) -> bool:
    return name.startswith(".") or name.lower() in SYSTEM_NAMES


def scan(root: Path) -> Scan:
    """The files under `root` (links not followed, hidden ones left out)."""
    out = Scan()
    for top, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not _hidden(d) and not (Path(top) / d).is_symlink())
        for name in sorted(names):
            if _hidden(name):
                continue
            path = Path(top) / name
            try:
                st = path.lstat()
            except OSError:
                continue  # removed meanwhile
            if not stat.S_ISREG(st.st_mode):
                continue  # a link, a device, a FIFO, a socket
            rel = path.relative_to(root).as_posix()
            out.present.add(rel)
            mime = mime_for_name(name)
            if mime is None or st.st_size == 0:
                out.skipped += 1
                continue
            out.files[rel] = LocalFile(rel, path, st.st_size, st.st_mtime_ns, mime)
    return out


def sha256_of(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class State:
    """What an earlier run learnt of the folder's files, kept in `path` (a missing or unreadable file is no
    memory): per `rel`, its size, modification time and SHA-256, and the server's refusal of those bytes."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        if path is not None:
            try:
                data = json.loads(path.read_text())
                if data.get("version") == STATE_VERSION and isinstance(data.get("files"), dict):
                    self.entries = data["files"]
            except (OSError, ValueError, AttributeError):
                pass

    def sha256(self, f: LocalFile) -> str:
        """The file's SHA-256: remembered when its size and modification time are as they were, else read."""
        known = self.entries.get(f.rel)
        if known and known.get("size") == f.size and known.get("mtime_ns") == f.mtime_ns and known.get("sha256"):
            return str(known["sha256"])
        digest = sha256_of(f.path)
        self.entries[f.rel] = {"size": f.size, "mtime_ns": f.mtime_ns, "sha256": digest}
        return digest

    def refused(self, f: LocalFile, sha: str) -> str | None:
        """Why the server refused these very bytes before, or None."""
        known = self.entries.get(f.rel) or {}
        return str(known["refused"]) if known.get("refused") and known.get("sha256") == sha else None

    def refuse(self, f: LocalFile, reason: str) -> None:
        self.entries.setdefault(f.rel, {})["refused"] = reason[:500]

    def accept(self, f: LocalFile) -> None:
        (self.entries.get(f.rel) or {}).pop("refused", None)

    def save(self, present: set[str]) -> None:
        """Write the memory (of the files still there) next to where it is read, atomically; best effort."""
        if self.path is None:
            return
        self.entries = {rel: e for rel, e in self.entries.items() if rel in present}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            part = self.path.with_suffix(".part")
            part.write_text(json.dumps({"version": STATE_VERSION, "files": self.entries}))
            part.replace(self.path)
        except OSError:
            pass


def state_path(url: str, root: Path, folder: str) -> Path:
    """Where the memory of syncing `root` into `folder` of the Lev at `url` is kept (XDG's cache folder)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lev" / "sync"
    key = hashlib.sha256("\n".join((url.rstrip("/"), str(root.resolve()), folder)).encode()).hexdigest()[:24]
    return base / f"{key}.json"


def check_folder(name: str) -> str | None:
    """Why `name` cannot name the Lev folder a directory is synced into, or None."""
    why = sourcepath.problem(name)
    return None if why is None else f"--folder {why}"
