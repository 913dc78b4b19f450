"""What every import file reads into: its folders (flattened `Parent / Child`, unique case-insensitively within
the file) and its links with their tags and folders; and the rules shared by the readers (lev.imports.bookmarks,
lev.imports.levfile): which links can be imported, how a bad line is reported (400 `invalid_body` with `line`),
and the bounds imported data is cut to (the REST API's: titles 500 characters, folder names 200).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lev.core import weburl
from lev.core.errors import ApiError, invalid_body
from lev.ingest import youtube
from lev.ingest.urls import canonical_url

MAX_FOLDER_NAME = 200  # FolderCreate.name
MAX_FOLDER_DEPTH = 100  # folders nested deeper are refused (400 naming the line)
MAX_FOLDERS = 5000  # folders in one file (more are refused)
MAX_TITLE_CHARS = 500  # IngestText.title, ItemUpdate.title
MAX_NOTE_CHARS = 5000  # a bookmark's description, a Pocket or Raindrop note, excerpt or highlights
MAX_TAGS = 100
MAX_METADATA_CHARS = 20_000  # an item's metadata from a Lev export, its strings and keys together
MAX_OUTPUT_CHARS = 20_000  # one output's content from a Lev export
MAX_OUTPUTS = 10  # outputs of one item from a Lev export
MAX_ITEMS = 100  # items of a list (members of an object) in imported metadata
MAX_TAG_CHARS = 100
MAX_URL_CHARS = 4096
MAX_SKIPPED = 1000  # skipped links listed (the import keeps as many)
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
    taken: set[str] = field(default_factory=set)  # the folder names so far, lower-cased
    keys: dict[str, str] = field(default_factory=dict)  # url -> dedupe_key(url), for the links accepted
    suffixes: dict[str, int] = field(default_factory=dict)  # lower-cased name -> the next " (n)" to try

    def folder(self, key: str, path: list[str] | FolderPath, line: int) -> str:
        """Register the folder at `path` under `key` (once) with a flattened name unique in this file; the file's
        folder past the 5,000th is refused (400 naming `line`)."""
        if key not in self.folders:
            if len(self.folders) >= MAX_FOLDERS:
                raise bad_file(line, f"the file has more than {MAX_FOLDERS} folders")
            at = path if isinstance(path, FolderPath) else FolderPath.of(path)
            name = unique_name(at.name, self.taken, self.suffixes)
            self.taken.add(name.lower())
            self.folders[key] = name
        return key


def folder_part(name: str) -> str:
    """One level of a folder path as a folder name holds it: white space collapsed, at most 200 characters."""
    return " ".join(name[: MAX_FOLDER_NAME * 4].split())[:MAX_FOLDER_NAME] or "Untitled folder"


@dataclass(frozen=True)
class FolderPath:
    """A folder's place in the file's tree, as much of it as its name needs: `Parent / Child` flattened, over 200
    characters the start giving way (`… / Child`). A child is derived from its parent in constant time, however
    deep the tree (nothing but the last 200 characters of the flattened path is kept)."""

    tail: str = ""  # the last 200 characters of the flattened path
    cut: bool = False  # whether the flattened path is longer than `tail`
    depth: int = 0

    def child(self, name: str) -> FolderPath:
        part = folder_part(name)
        full = f"{self.tail} / {part}" if self.depth else part
        return FolderPath(full[-MAX_FOLDER_NAME:], self.cut or len(full) > MAX_FOLDER_NAME, self.depth + 1)

    @property
    def name(self) -> str:
        return "…" + self.tail[-(MAX_FOLDER_NAME - 1):] if self.cut else self.tail

    @staticmethod
    def of(path: list[str]) -> FolderPath:
        at = FolderPath()
        for part in path:
            at = at.child(part)
        return at


def unique_name(name: str, taken: set[str], suffixes: dict[str, int] | None = None) -> str:
    """`name`, or `name (2)`, `name (3)` ... when another folder of this file has it (compared case-insensitively).
    `suffixes` remembers the next number to try per name, so a thousand folders of one name cost a thousand
    steps, not half a million."""
    key = name.lower()
    if key not in taken:
        return name
    counters = suffixes if suffixes is not None else {}
    n = counters.get(key, 2)
    while True:
        suffix = f" ({n})"
        candidate = name[: MAX_FOLDER_NAME - len(suffix)] + suffix
        n += 1
        if candidate.lower() not in taken:
            counters[key] = n
            return candidate


def title_of(raw: str | None) -> str | None:
    """A title as the REST API bounds it: white space collapsed, at most 500 characters."""
    title = " ".join((raw or "")[: MAX_TITLE_CHARS * 4].split())[:MAX_TITLE_CHARS]
    return title or None


def bounded(value: Any, chars: int) -> Any:
    """A JSON value cut to bounds: at most `chars` characters of strings and keys in all, lists and objects to their
    first 100 items, nothing below 4 levels of nesting (what is left out is dropped)."""
    budget = [chars]

    def cut(v: Any, depth: int) -> Any:
        if isinstance(v, str):
            v = v[:max(budget[0], 0)]
            budget[0] -= len(v)
            return v
        if isinstance(v, list):
            return [cut(x, depth + 1) for x in v[:MAX_ITEMS] if depth < 4 and budget[0] > 0]
        if isinstance(v, dict):
            out = {}
            for key, x in list(v.items())[:MAX_ITEMS]:
                if depth >= 4 or budget[0] <= 0:
                    break
                out[cut(key, depth)] = cut(x, depth + 1)
            return out
        return v

    return cut(value, 1)


def note_of(raw: str | None) -> str:
    """A note (a bookmark's description, a CSV's note, excerpt or highlights), at most 5000 characters."""
    return (raw or "").strip()[:MAX_NOTE_CHARS]


def dedupe_key(url: str) -> str:
    """What makes two links the same item: the canonical URL (YouTube's own canonical form for videos)."""
    if youtube.is_youtube(url):
        return youtube.canonical_url(url)
    return canonical_url(url)


def check_url(parsed: Parsed, line: int, url: str) -> str | None:
    """The URL when Lev can fetch it, else None after noting it as skipped."""
    url = url.strip()
    reason = None
    if url in parsed.keys:
        return url
    if not url[:8].lower().startswith(("http://", "https://")):
        reason = "only http and https links can be imported"
    elif len(url) > MAX_URL_CHARS:
        reason = f"the URL is longer than {MAX_URL_CHARS} characters"
    elif not weburl.is_http_url(url):
        reason = "the URL cannot be parsed"
    else:
        try:
            parsed.keys[url] = dedupe_key(url)
        except (ValueError, ApiError):
            reason = "the URL cannot be parsed"
    if reason is not None:
        if len(parsed.skipped) < MAX_SKIPPED:
            parsed.skipped.append({"line": line, "url": url[:500], "reason": reason})
        return None
    return url


def tags_of(raw: str | None, sep: str) -> list[str]:
    """The tags of a `sep`-separated list: at most 100, each at most 100 characters, each once."""
    tags: dict[str, None] = {}
    for tag in (raw or "").split(sep):
        tag = tag.strip()[:MAX_TAG_CHARS]
        if tag:
            tags[tag] = None
            if len(tags) >= MAX_TAGS:
                break
    return list(tags)


def merge_tags(first: list[str], more: list[str]) -> list[str]:
    """Two links' tags as one list (each once, at most 100)."""
    return list(dict.fromkeys([*first, *more]))[:MAX_TAGS]


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
