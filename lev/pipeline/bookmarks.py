"""Reading an import file: a browser's bookmark export (Netscape bookmark HTML), a Pocket or Raindrop.io CSV export
(or any CSV with a `url` column), or a Lev export (JSON Lines). The result is the file's folders, flattened as
`Parent / Child` and made unique case-insensitively, and its links (or texts) with their tags and folders.

A file that cannot be read is a 400 naming the line (`invalid_body` with `line`); links Lev cannot fetch at all
(javascript:, place:, file: ...) are skipped with the reason, not errors.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

from lev.errors import ApiError, invalid_body
from lev.pipeline import youtube
from lev.pipeline.fetch import canonical_url

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


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_file(data.count(b"\n", 0, exc.start) + 1, "the file is not UTF-8 text") from None
    if "\x00" in text:
        raise bad_file(text.count("\n", 0, text.index("\x00")) + 1, "the file holds a NUL character")
    return text.removeprefix("\ufeff")


def parse(data: bytes) -> Parsed:
    """Recognise and read an import file (400 `invalid_body` with `line` when it cannot be read)."""
    text = _decode(data)
    head = text.lstrip()[:2000]
    if head.startswith("{"):
        parsed = _parse_lev(text)
    elif re.match(r"(?is)<!DOCTYPE\s+NETSCAPE-Bookmark-file", head) or re.search(r"(?i)<(dl|h3|a)[\s>]", head):
        parsed = _parse_netscape(text)
    elif head:
        parsed = _parse_csv(text)
    else:
        raise bad_file(1, "the file is empty")
    return _merge(parsed)


def _merge(parsed: Parsed) -> Parsed:
    """One entry per item: links to the same page are merged (every folder, every tag, the first title)."""
    seen: dict[str, Link] = {}
    out: list[Link] = []
    for link in parsed.links:
        if link.url is None:
            out.append(link)
            continue
        key = dedupe_key(link.url)
        first = seen.get(key)
        if first is None:
            seen[key] = link
            out.append(link)
            continue
        first.folders += [f for f in link.folders if f not in first.folders]
        tags = first.metadata.get("tags", []) + [t for t in link.metadata.get("tags", [])
                                                 if t not in first.metadata.get("tags", [])]
        if tags:
            first.metadata["tags"] = tags
        first.title = first.title or link.title
    parsed.links = out
    return parsed


def _check_url(parsed: Parsed, line: int, url: str) -> str | None:
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


def _tags(raw: str | None, sep: str) -> list[str]:
    return list(dict.fromkeys(t.strip() for t in (raw or "").split(sep) if t.strip()))


def _timestamp(raw: str | None) -> str | None:
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


# ------------------------------------------------------------------------------------------------ Netscape HTML


class _Netscape(HTMLParser):
    """Folders are <H3> followed by a <DL> of children; links are <A HREF>, a following <DD> is the note."""

    def __init__(self, parsed: Parsed) -> None:
        super().__init__(convert_charrefs=True)
        self.parsed = parsed
        self.stack: list[tuple[str | None, list[str]]] = []  # (folder key, path) per open <DL>
        self.pending_folder: list[str] | None = None  # a <H3> read, its <DL> not yet open
        self.capture: str | None = None  # "h3", "a" or "dd" while reading their text
        self.buffer: list[str] = []
        self.link: Link | None = None
        self.folder_count = 0
        self.last_link: Link | None = None
        self.saw_structure = False

    def _line(self) -> int:
        return self.getpos()[0]

    def _path(self) -> list[str]:
        return self.stack[-1][1] if self.stack else []

    def _close_capture(self) -> None:
        text = " ".join("".join(self.buffer).split())
        if self.capture == "h3":
            self.pending_folder = [*self._path(), text]
        elif self.capture == "a" and self.link is not None:
            self.link.title = text or None
            self.parsed.links.append(self.link)
            self.last_link, self.link = self.link, None
        elif self.capture == "dd" and self.last_link is not None and text:
            self.last_link.metadata["description"] = text[:5000]
        self.capture, self.buffer = None, []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k.lower(): v or "" for k, v in attrs}
        if self.capture == "dd" and tag in ("dt", "dl", "h3", "a"):
            self._close_capture()
        if tag == "dl":
            self.saw_structure = True
            if self.pending_folder is not None:
                self.folder_count += 1
                key = self.parsed.folder(f"n{self.folder_count}", self.pending_folder)
                self.stack.append((key, self.pending_folder))
                self.pending_folder = None
            else:
                self.stack.append(self.stack[-1] if self.stack else (None, []))
        elif tag == "h3":
            self.saw_structure = True
            self.capture, self.buffer, self.pending_folder = "h3", [], None
        elif tag == "a":
            self.saw_structure = True
            self.last_link = None
            if "href" not in attr:
                raise bad_file(self._line(), "a bookmark (<A>) without HREF")
            url = _check_url(self.parsed, self._line(), attr["href"])
            if url is None:
                return
            meta: dict[str, Any] = {}
            tags = _tags(attr.get("tags"), ",")
            if tags:
                meta["tags"] = tags
            added = _timestamp(attr.get("add_date"))
            if added:
                meta["added_at"] = added
            here = self.stack[-1][0] if self.stack else None
            self.link = Link(line=self._line(), url=url, folders=[here] if here else [], metadata=meta)
            self.capture, self.buffer = "a", []
        elif tag == "dd":
            self.capture, self.buffer = "dd", []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h3", "a") and self.capture == tag:
            self._close_capture()
        elif tag == "dl":
            if self.capture == "dd":
                self._close_capture()
            if not self.stack:
                raise bad_file(self._line(), "</DL> closes a folder that was never opened")
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.capture is not None:
            self.buffer.append(data)


def _parse_netscape(text: str) -> Parsed:
    parsed = Parsed("netscape")
    reader = _Netscape(parsed)
    reader.feed(text)
    reader.close()
    if reader.capture is not None:
        reader._close_capture()
    if not reader.saw_structure:
        raise bad_file(1, "no bookmarks or folders found (expected <DL>, <H3> and <A HREF> elements)")
    return parsed


# ------------------------------------------------------------------------------------------------ CSV


def _parse_csv(text: str) -> Parsed:
    lines = io.StringIO(text, newline="")
    reader = csv.reader(lines)
    try:
        header = [h.strip().lower() for h in next(reader)]
    except (StopIteration, csv.Error) as exc:
        raise bad_file(1, f"not a bookmark file, Pocket or Raindrop CSV, or Lev export ({exc})") from None
    if "url" not in header:
        raise bad_file(1, "not a Netscape bookmark file, Lev export, or CSV with a url column "
                          f"(the header names {', '.join(header[:12]) or 'nothing'})")
    fmt = "raindrop" if {"folder", "excerpt"} <= set(header) else "pocket" if "time_added" in header else "csv"
    parsed = Parsed(fmt)
    col = {name: i for i, name in reversed(list(enumerate(header)))}
    line = reader.line_num + 1
    try:
        for row in reader:
            start, line = line, reader.line_num + 1
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise bad_file(start, f"{len(row)} fields where the header has {len(header)}")
            _csv_link(parsed, fmt, start, {name: row[i] for name, i in col.items()})
    except csv.Error as exc:
        raise bad_file(reader.line_num, f"the CSV cannot be read: {exc}") from None
    return parsed


def _csv_link(parsed: Parsed, fmt: str, line: int, row: dict[str, str]) -> None:
    raw_url = row["url"].strip()
    if not raw_url:
        raise bad_file(line, "the url column is empty")
    url = _check_url(parsed, line, raw_url)
    if url is None:
        return
    meta: dict[str, Any] = {}
    tags = _tags(row.get("tags"), "|" if fmt == "pocket" else ",")
    if tags:
        meta["tags"] = tags
    added = _timestamp(row.get("time_added") or row.get("created"))
    if added:
        meta["added_at"] = added
    for name in ("note", "excerpt", "highlights"):
        if (row.get(name) or "").strip():
            meta[name] = row[name].strip()[:5000]
    if (row.get("favorite") or "").strip().lower() == "true":
        meta["favorite"] = True
    folders: list[str] = []
    folder = (row.get("folder") or "").strip()
    if folder and not (fmt == "raindrop" and folder.lower() == "unsorted"):
        path = [p for p in (part.strip() for part in folder.split("/")) if p]
        if path:
            folders.append(parsed.folder("p:" + "\x1f".join(p.lower() for p in path), path))
    archived = (row.get("status") or "").strip().lower() in ("archive", "archived")
    parsed.links.append(Link(line=line, url=url, title=(row.get("title") or "").strip() or None, folders=folders,
                             metadata=meta, archived=archived))


# ------------------------------------------------------------------------------------------------ Lev export


def _parse_lev(text: str) -> Parsed:
    parsed = Parsed("lev")
    items: dict[str, Link] = {}
    ended = header = False
    number = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if ended:
            raise bad_file(number, "nothing may follow the export's end line")
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise bad_file(number, f"not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise bad_file(number, "each line must be a JSON object")
        kind = record.get("type")
        if not header:
            header = True
            if kind != LEV_EXPORT_TYPE:
                raise bad_file(number, f"a Lev export starts with a {LEV_EXPORT_TYPE!r} line")
            if record.get("version") != LEV_EXPORT_VERSION:
                raise bad_file(number, f"unknown Lev export version {record.get('version')!r}")
            continue
        if kind == "folder":
            _lev_folder(parsed, number, record)
        elif kind == "item":
            item_id, link = _lev_item(parsed, number, record)
            if item_id in items:
                raise bad_file(number, f"item {item_id} appears twice")
            items[item_id] = link
            if link.url is not None or link.text is not None:
                parsed.links.append(link)
        elif kind == "output":
            _lev_output(items, number, record)
        elif kind == "end":
            ended = True
        else:
            raise bad_file(number, f"unknown line type {kind!r} (expected folder, item, output or end)")
    if not ended:
        raise bad_file(number + 1, "the export has no end line (was it cut short?)")
    return parsed


def _field(number: int, record: dict[str, Any], name: str, types: type | tuple[type, ...],
           required: bool = False) -> Any:
    value = record.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, types) or isinstance(value, bool) and bool not in (
            types if isinstance(types, tuple) else (types,)):
        raise bad_file(number, f"{name} is missing or of the wrong type")
    return value


def _lev_folder(parsed: Parsed, number: int, record: dict[str, Any]) -> None:
    folder_id = _field(number, record, "id", str, True)
    name = _field(number, record, "name", str, True).strip()
    if not name or "\x00" in name:
        raise bad_file(number, "a folder needs a name")
    if folder_id in parsed.folders:
        raise bad_file(number, f"folder {folder_id} appears twice")
    parsed.folder(folder_id, [name])


def _lev_item(parsed: Parsed, number: int, record: dict[str, Any]) -> tuple[str, Link]:
    item_id = _field(number, record, "id", str, True)
    url = _field(number, record, "url", str)
    text = _field(number, record, "text", str)
    if url is None and (text is None or not text.strip()):
        raise bad_file(number, "an item needs a url or a text")
    folder_ids = _field(number, record, "folder_ids", list) or []
    missing = [f for f in folder_ids if f not in parsed.folders]
    if missing:
        raise bad_file(number, f"the item names folder {missing[0]!r}, which no earlier folder line defines")
    metadata = _field(number, record, "metadata", dict) or {}
    title = _field(number, record, "title", str)
    link = Link(line=number, title=title, folders=list(dict.fromkeys(folder_ids)), metadata=metadata,
                in_kb=_field(number, record, "in_kb", bool) is not False,
                archived=_field(number, record, "archived", bool) is True)
    if url is not None:
        link.url = _check_url(parsed, number, url)
    elif len(text or "") > MAX_TEXT_CHARS:
        raise bad_file(number, f"the text is longer than {MAX_TEXT_CHARS} characters")
    else:
        link.text = text
    return item_id, link


def _lev_output(items: dict[str, Link], number: int, record: dict[str, Any]) -> None:
    item_id = _field(number, record, "item_id", str, True)
    if item_id not in items:
        raise bad_file(number, f"the output belongs to item {item_id!r}, which no earlier item line defines")
    kind = _field(number, record, "kind", str, True)
    generator = _field(number, record, "generator", str, True)
    if "content" not in record:
        raise bad_file(number, "an output needs its content")
    items[item_id].outputs.append({"kind": kind, "content": record["content"], "generator": generator})

