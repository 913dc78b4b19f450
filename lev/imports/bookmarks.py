"""Reading an import file: a browser's bookmark export (Netscape bookmark HTML), a Pocket or Raindrop.io CSV export
(or any CSV with a `url` column), or a Lev export (JSON Lines). The result is the file's folders, flattened as
`Parent / Child` and made unique case-insensitively, and its links (or texts) with their tags and folders.

A file that cannot be read is a 400 naming the line (`invalid_body` with `line`); links Lev cannot fetch at all
(javascript:, place:, file: ...) are skipped with the reason, not errors.
"""

from __future__ import annotations

import csv
import io
import re
from html.parser import HTMLParser
from typing import Any

from lev.imports.importfile import Link, Parsed, bad_file, check_url, dedupe_key, tags_of, timestamp
from lev.imports.levfile import parse_lev


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
        parsed = parse_lev(text)
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
            url = check_url(self.parsed, self._line(), attr["href"])
            if url is None:
                return
            meta: dict[str, Any] = {}
            tags = tags_of(attr.get("tags"), ",")
            if tags:
                meta["tags"] = tags
            added = timestamp(attr.get("add_date"))
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
    url = check_url(parsed, line, raw_url)
    if url is None:
        return
    meta: dict[str, Any] = {}
    tags = tags_of(row.get("tags"), "|" if fmt == "pocket" else ",")
    if tags:
        meta["tags"] = tags
    added = timestamp(row.get("time_added") or row.get("created"))
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
