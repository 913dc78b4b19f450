"""Reading an import file: a browser's bookmark export (Netscape bookmark HTML), a Pocket or Raindrop.io CSV export
(or any CSV with a `url` column), or a Lev export (JSON Lines). The result is the file's folders, flattened as
`Parent / Child` and made unique case-insensitively, and its links (or texts) with their tags and folders.

A file that cannot be read is a 400 naming the line (`invalid_body` with `line`), and so is one whose folders nest
deeper than 100 levels; links Lev cannot fetch at all (javascript:, place:, file: ...) are skipped with the reason,
not errors. Reading is linear in the file's size: titles, notes, tags and folder names are cut to their bounds as
they are read (lev.imports.importfile).
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

from lev.imports.importfile import (
    MAX_FOLDER_DEPTH,
    Link,
    Parsed,
    bad_file,
    check_url,
    dedupe_key,
    folder_part,
    merge_tags,
    note_of,
    tags_of,
    timestamp,
    title_of,
)
from lev.imports.levfile import parse_lev
from lev.imports.netscape import parse_netscape


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
        parsed = parse_netscape(text)
    elif head:
        parsed = _parse_csv(text)
    else:
        raise bad_file(1, "the file is empty")
    return _merge(parsed)


def _merge(parsed: Parsed) -> Parsed:
    """One entry per item: links to the same page are merged (every folder, every tag, the first title)."""
    seen: dict[str, Link] = {}
    folders: dict[int, dict[str, None]] = {}  # per merged link, its folders as an ordered set
    out: list[Link] = []
    for link in parsed.links:
        if link.url is None:
            out.append(link)
            continue
        key = parsed.keys.get(link.url) or dedupe_key(link.url)
        first = seen.get(key)
        if first is None:
            seen[key] = link
            out.append(link)
            continue
        merged = folders.get(id(first))
        if merged is None:
            merged = folders[id(first)] = dict.fromkeys(first.folders)
        merged.update(dict.fromkeys(link.folders))
        if link.metadata.get("tags"):
            first.metadata["tags"] = merge_tags(first.metadata.get("tags", []), link.metadata["tags"])
        first.title = first.title or link.title
    for link in out:
        if id(link) in folders:
            link.folders = list(folders[id(link)])
    parsed.links = out
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
        note = note_of(row.get(name))
        if note:
            meta[name] = note
    if (row.get("favorite") or "").strip().lower() == "true":
        meta["favorite"] = True
    folders: list[str] = []
    folder = (row.get("folder") or "").strip()
    if folder and not (fmt == "raindrop" and folder.lower() == "unsorted"):
        path = [folder_part(p) for p in (part.strip() for part in folder.split("/", MAX_FOLDER_DEPTH)) if p]
        if len(path) > MAX_FOLDER_DEPTH:
            raise bad_file(line, f"the folder nests deeper than {MAX_FOLDER_DEPTH} levels")
        if path:
            folders.append(parsed.folder("p:" + "\x1f".join(p.lower() for p in path), path, line))
    archived = (row.get("status") or "").strip().lower() in ("archive", "archived")
    parsed.links.append(Link(line=line, url=url, title=title_of(row.get("title")), folders=folders,
                             metadata=meta, archived=archived))
