"""What every import file reads into: its folders (flattened `Parent / Child`, unique case-insensitively within
the file) and its links with their tags and folders; and the rules shared by the readers (lev.imports.bookmarks,
lev.imports.levfile): which links can be imported, how a bad line is reported (400 `invalid_body` with `line`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lev.core.errors import ApiError, invalid_body
from lev.ingest import youtube
from lev.ingest.urls import canonical_url

MAX_FOLDER_NAME = 200
MAX_URL_CHARS = 4096
MAX_TEXT_CHARS = 1_000_000
LEV_EXPORT_TYPE = "lev_export"
LEV_EXPORT_VERSION = 1


def bad_file(line: int, message: str) -> ApiError:
    """400 for an unreadable import file, saying which line."""
    return invalid_body(f"line {line}: {message}", line=line)


@dataclass
class Link:
    """One entry of the file: a URL (or, in a Lev export, a text) with what the file says about it."""

    line: int
    url: str | None = None
    text: str | None = None
    title: str | None = None
    folders: list[str] = field(default_factory=list)  # folder keys (see Parsed.folders)
    metadata: dict[str, Any] = field(default_factory=dict)
    in_kb: bool = True
    archived: bool = False
    outputs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Parsed:
    format: str
    folders: dict[str, str] = field(default_factory=dict)  # key -> unique flattened name, in file order
    links: list[Link] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {line, url, reason}

    def folder(self, key: str, path: list[str]) -> str:
        """Register the folder at `path` under `key` (once) with a flattened name unique in this file."""
        if key not in self.folders:
            self.folders[key] = unique_name(flatten(path), {n.lower() for n in self.folders.values()})
        return key


def flatten(path: list[str]) -> str:
    """`Parent / Child` from a folder path; over 200 characters the start gives way (`… / Child`)."""
    name = " / ".join(" ".join(p.split()) or "Untitled folder" for p in path)
    return name if len(name) <= MAX_FOLDER_NAME else "…" + name[-(MAX_FOLDER_NAME - 1):]


def unique_name(name: str, taken: set[str]) -> str:
    """`name`, or `name (2)`, `name (3)` ... when another folder of this file has it (compared case-insensitively)."""
    if name.lower() not in taken:
        return name
    n = 2
    while True:
        suffix = f" ({n})"
        candidate = name[: MAX_FOLDER_NAME - len(suffix)] + suffix
        if candidate.lower() not in taken:
            return candidate
        n += 1


def dedupe_key(url: str) -> str:
    """What makes two links the same item: the canonical URL (YouTube's own canonical form for videos)."""
    if youtube.is_youtube(url):
        return youtube.canonical_url(url)
    return canonical_url(url)


def check_url(parsed: Parsed, line: int, url: str) -> str | None:
    """The URL when Lev can fetch it, else None after noting it as skipped."""
    url = url.strip()
    reason = None
    if not url.lower().startswith(("http://", "https://")):
        reason = "only http and https links can be imported"
    elif len(url) > MAX_URL_CHARS:
        reason = f"the URL is longer than {MAX_URL_CHARS} characters"
    else:
        try:
            dedupe_key(url)
        except (ValueError, ApiError):
            reason = "the URL cannot be parsed"
    if reason is not None:
        parsed.skipped.append({"line": line, "url": url[:500], "reason": reason})
        return None
    return url


def tags_of(raw: str | None, sep: str) -> list[str]:
    return list(dict.fromkeys(t.strip() for t in (raw or "").split(sep) if t.strip()))


def timestamp(raw: str | None) -> str | None:
    """An ISO 8601 time from Unix seconds (bookmark ADD_DATE, Pocket time_added) or an ISO string."""
    raw = (raw or "").strip()
    if not raw:
        return None
    if raw.isdigit():
        seconds = int(raw)
        if seconds > 10**11:  # microseconds or milliseconds from some exporters
            seconds //= 1000 if seconds < 10**14 else 1_000_000
        try:
            return datetime.fromtimestamp(seconds, UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            return None
    return raw[:40]
