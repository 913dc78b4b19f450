"""Reading a ZIP of a folder (an Obsidian vault, a Notion or Google Drive export, any folder) into the files an
import keeps: each supported file with its source path (`Vault/Projects/plan.md`: the Lev folder it goes in, named
by its path, then its name) and everything else skipped with the reason.

Only the archive's central directory is read here (in a child process: a directory of 20,000 entries is parsed in
Python); members are read one at a time by the import job, never extracted to a file system under their names.
What is refused outright, nothing stored: an archive that cannot be read (422), one with more entries than the cap,
files that would unpack past the cap or at a ratio only a ZIP bomb has (413), a member whose path leaves the
archive (`../`, an absolute path: 400). What is skipped, the rest imported: links, device files, FIFOs and sockets,
encrypted members, hidden and system files, types Lev does not keep, files past the upload size, names repeated.
"""

from __future__ import annotations

import re
import stat
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO, Any

from lev.core import sourcepath
from lev.core.mimes import mime_for_name

ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
MAX_FOLDER_NAME = 200  # FolderCreate.name
MAX_FOLDERS = 5000  # as a bookmark file's
MAX_DEPTH = sourcepath.MAX_DEPTH
MAX_PATH_CHARS = sourcepath.MAX_CHARS
MAX_SKIPPED = 1000  # skipped files listed (all are counted)
BOMB_RATIO = 100  # unpacked bytes per archive byte past which (and past BOMB_FLOOR) an archive is refused
BOMB_FLOOR = 64 * 1024 * 1024
_READABLE = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
_SYSTEM = {"__macosx", "thumbs.db", "desktop.ini", "icon\r"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"^[A-Za-z]:")


def is_zip(head: bytes, filename: str | None) -> bool:
    """Whether an import file is a ZIP: its magic bytes, or its name when they are not there (a truncated one)."""
    return head.startswith(ZIP_MAGIC) or (filename or "").lower().endswith(".zip")


class Refused(Exception):
    """The archive is refused: the error code of lev.core.errors's table, the message, the body's extra fields.
    (Raised in a child process: this module imports next to nothing of Lev's, so the child starts quickly.)"""

    def __init__(self, code: str, message: str, extra: dict[str, Any]) -> None:
        super().__init__(code, message, extra)
        self.code, self.message, self.extra = code, message, extra


def _unreadable(message: str) -> Refused:
    return Refused("extraction_failed", message, {})


def _too_large(message: str, max_bytes: int, **extra: Any) -> Refused:
    return Refused("file_too_large", message, {"maxBytes": max_bytes, **extra})


def _bad(message: str, **extra: Any) -> Refused:
    return Refused("invalid_body", message, extra)


@dataclass(frozen=True)
class Limits:
    max_files: int
    max_unpacked: int
    max_bytes: int
    max_file: int  # an upload's bytes


@dataclass(frozen=True)
class Member:
    """One file the import keeps: where it is in the archive and where it goes in Lev."""

    line: int  # its place among the archive's entries, from 1
    member: str  # its name in the archive
    path: str  # its source path: the folder's path, then its name
    folder: str | None  # the Lev folder's name (its path, cut to 200 characters from the start)
    name: str  # its file name
    mime: str
    size: int


@dataclass
class Listing:
    members: list[Member] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)  # in the archive's order, each once (case-insensitively)
    skipped: list[dict[str, object]] = field(default_factory=list)  # {line, path, reason}, at most 1000
    skipped_total: int = 0
    unpacked: int = 0

    def skip(self, line: int, path: str, reason: str) -> None:
        self.skipped_total += 1
        if len(self.skipped) < MAX_SKIPPED:
            self.skipped.append({"line": line, "path": path[:MAX_PATH_CHARS], "reason": reason})


def _parts(name: str) -> list[str]:
    return [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]


def _leaves(name: str) -> bool:
    """Whether a member's name points outside the archive: `..`, an absolute path or a drive."""
    unified = name.replace("\\", "/")
    return unified.startswith("/") or bool(_DRIVE.match(unified)) or ".." in unified.split("/")


def _junk(parts: list[str]) -> bool:
    """Hidden (a part starting with a dot: `.obsidian/`, `.git/`, `.DS_Store`) or an operating system's own."""
    return any(p.startswith(".") or p.lower() in _SYSTEM for p in parts)


def _special(info: zipfile.ZipInfo) -> str | None:
    """Why a member is not a regular file (a Unix link, device, FIFO or socket), or None."""
    if info.create_system != 3:  # only Unix archivers record a file's type
        return None
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        return "a symbolic link (links are not followed)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def read_listing(local: str, size: int, filename: str | None, root: str | None, limits: Limits) -> Listing:
    """The files of the ZIP at `local` (`size` bytes) and where each goes; `root` names its top folder (default: the
    archive's one top-level folder, else its file name). Raises the refusals the module docstring lists."""
    try:
        check_end(local, limits)  # refused before its directory is parsed
        with zipfile.ZipFile(local) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, struct.error) as exc:
        raise _unreadable(f"The ZIP archive cannot be read (truncated or corrupt: {exc}).") from None
    if len(infos) > limits.max_files:
        raise _too_many(len(infos), limits)
    for info in infos:
        if _leaves(info.filename):
            raise _bad(f"The archive's entry {info.filename[:300]!r} points outside the archive (`..` or an "
                               "absolute path); nothing was imported.", member=info.filename[:300])
    return _map(infos, size, filename, root, limits)


def _too_many(count: int, limits: Limits) -> Refused:
    return _too_large(f"The archive holds {count} entries; an import takes at most {limits.max_files} "
                          "(LEV_IMPORT_ARCHIVE_MAX_FILES). Import it in parts.", limits.max_bytes,
                          maxFiles=limits.max_files)


@dataclass(frozen=True)
class EndRecord:
    entries: int  # what the archive's end record declares (zip64's when it has one)
    directory_bytes: int  # the central directory's size: what reading it costs (zipfile reads that many bytes)


def end_record(fp: IO[bytes]) -> EndRecord | None:
    """The archive's end record, or None when none is found (it cannot be read)."""
    fp.seek(0, 2)
    size = fp.tell()
    back = min(size, 22 + 0xFFFF)  # the record, after it a comment of at most 65535 bytes
    fp.seek(size - back)
    tail = fp.read(back)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return None
    total, directory = struct.unpack_from("<HI", tail, at + 10)
    if (total == 0xFFFF or directory == 0xFFFFFFFF) and at >= 20 and tail[at - 20:at - 16] == b"PK\x06\x07":
        fp.seek(struct.unpack_from("<Q", tail, at - 12)[0])
        record = fp.read(56)
        if record[:4] == b"PK\x06\x06" and len(record) == 56:
            total, directory = struct.unpack_from("<QQ", record, 32)
    return EndRecord(int(total), int(directory))


def check_end(local: str, limits: Limits) -> EndRecord | None:
    """Refuse an archive whose end record declares more entries than the cap (before its directory is read)."""
    with open(local, "rb") as fp:
        end = end_record(fp)
    if end is not None and end.entries > limits.max_files:
        raise _too_many(end.entries, limits)
    return end


def _top(infos: list[zipfile.ZipInfo]) -> str | None:
    """The archive's one top-level folder, when every entry that is not junk lies in it."""
    tops = set()
    for info in infos:
        parts = _parts(info.filename)
        if not parts or _junk(parts):
            continue
        if len(parts) == 1 and not info.is_dir():
            return None
        tops.add(parts[0])
        if len(tops) > 1:
            return None
    return next(iter(tops)) if tops else None


def _root_name(filename: str | None) -> str:
    stem = PurePosixPath((filename or "").replace("\\", "/")).name
    stem = stem[:-4] if stem.lower().endswith(".zip") else stem
    return " ".join(stem.split())[:MAX_FOLDER_NAME] or "Import"


def _map(infos: list[zipfile.ZipInfo], size: int, filename: str | None, root: str | None,
         limits: Limits) -> Listing:
    out = Listing()
    top = _top(infos)
    base = root or top or _root_name(filename)
    seen: set[str] = set()
    folders: dict[str, None] = {}
    folder_keys: set[str] = set()
    for line, info in enumerate(infos, 1):
        parts = _parts(info.filename)
        if top is not None and parts and parts[0] == top:
            parts = parts[1:]
        if info.is_dir() or not parts:
            continue
        path = "/".join([base, *parts])
        reason = _why_not(info, parts, path, limits.max_file)
        if reason is None and path in seen:
            reason = "the archive holds this path twice (the first is kept)"
        if reason is not None:
            out.skip(line, path, reason)
            continue
        mime = mime_for_name(parts[-1])
        assert mime is not None
        seen.add(path)
        folder = sourcepath.folder_of([base, *parts[:-1]])
        assert folder is not None
        if folder.lower() not in folder_keys:
            if len(folder_keys) >= MAX_FOLDERS:
                raise _bad(f"The archive has more than {MAX_FOLDERS} folders; nothing was imported.")
            folder_keys.add(folder.lower())
            folders[folder] = None
        out.members.append(Member(line, info.filename, path, folder, parts[-1], mime, info.file_size))
        out.unpacked += info.file_size
    out.folders = list(folders)
    _check_bomb(out.unpacked, size, limits)
    return out


def _why_not(info: zipfile.ZipInfo, parts: list[str], path: str, max_file: int) -> str | None:
    """Why an archive's file is not imported, or None when it is."""
    special = _special(info)
    if special is not None:
        return special
    if _junk(parts):
        return "a hidden or system file"
    if _CONTROL.search(info.filename):
        return "its name holds control characters"
    if len(parts) > MAX_DEPTH:
        return f"it lies deeper than {MAX_DEPTH} folders"
    if len(path) > MAX_PATH_CHARS:
        return f"its path is longer than {MAX_PATH_CHARS} characters"
    if info.flag_bits & 0x1:
        return "it is encrypted (password-protected)"
    if info.compress_type not in _READABLE:
        return f"it is compressed by a method Lev cannot read (ZIP method {info.compress_type})"
    name = parts[-1]
    suffix = PurePosixPath(name).suffix.lower()
    if suffix == ".zip":
        return "an archive inside the archive (not opened)"
    if mime_for_name(name) is None:
        return f"Lev does not keep this type ({suffix or 'no extension'})"
    if info.file_size > max_file:
        return f"larger than an upload may be ({max_file} bytes)"
    if info.file_size == 0:
        return "it is empty"
    why = sourcepath.problem(path)
    return None if why is None else f"its path cannot be kept: it {why}"


def _check_bomb(unpacked: int, size: int, limits: Limits) -> None:
    if unpacked > limits.max_unpacked:
        raise _too_large(f"The archive's files unpack to {unpacked} bytes; an import takes at most "
                             f"{limits.max_unpacked} (LEV_IMPORT_ARCHIVE_MAX_UNPACKED).", limits.max_unpacked)
    if unpacked > BOMB_FLOOR and unpacked > BOMB_RATIO * max(size, 1):
        raise _too_large(f"The archive's files unpack to {unpacked} bytes, {unpacked // max(size, 1)} times its "
                             f"size: past {BOMB_RATIO} to 1, only a ZIP bomb is so compressed. Nothing was imported.",
                             limits.max_unpacked)

