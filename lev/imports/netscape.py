"""Reading a browser's bookmark export (Netscape bookmark HTML): folders are <H3> followed by a <DL> of children,
links are <A HREF>, a following <DD> is the link's note.

The HTML is tokenised by libxml2 (lxml's HTML parser, events into `_Reader`), which reads malformed markup in time
linear in its size (CPython 3.11's `html.parser` takes quadratic time on some, e.g. thousands of unclosed `<a`).
The file is fed up to the end of each line holding an <A> or <DL> tag (and in pieces of at most 64 KiB), so the
reader knows the line of those elements and no single call into the parser runs for long. Folders nested deeper than
100 levels are refused with the line.
"""

from __future__ import annotations

import re
from typing import Any

from lxml import etree

from lev.imports.importfile import (
    MAX_FOLDER_DEPTH,
    MAX_FOLDER_NAME,
    MAX_NOTE_CHARS,
    FolderPath,
    Link,
    Parsed,
    bad_file,
    check_url,
    note_of,
    tags_of,
    timestamp,
    title_of,
)

FEED_CHARS = 64 * 1024  # the longest piece handed to libxml2 at once
_KEEP = 4 * max(MAX_FOLDER_NAME, MAX_NOTE_CHARS)  # the start of a text kept (white space is collapsed later)
_CLOSE_DL = re.compile(r"</dl[\s>]", re.IGNORECASE)
_NEEDS_LINE = re.compile(r"<(?:a|dl|(/)dl)[\s>]", re.IGNORECASE)


class _Reader:
    """lxml parser target: builds the folders and links of `parsed` from the element events."""

    def __init__(self, parsed: Parsed) -> None:
        self.parsed = parsed
        self.line = 1  # the line being fed
        self.stack: list[tuple[str | None, FolderPath]] = []  # (folder key, path) per open <DL>
        self.pending_folder: FolderPath | None = None  # a <H3> read, its <DL> not yet open
        self.capture: str | None = None  # "h3", "a" or "dd" while reading their text
        self.buffer: list[str] = []
        self.captured = 0  # characters in `buffer`
        self.link: Link | None = None
        self.folder_count = 0
        self.dl_opened = 0
        self.last_link: Link | None = None
        self.saw_structure = False

    def _path(self) -> FolderPath:
        return self.stack[-1][1] if self.stack else FolderPath()

    def _capture(self, what: str | None) -> None:
        self.capture, self.buffer, self.captured = what, [], 0

    def close_capture(self) -> None:
        text = "".join(self.buffer)
        if self.capture == "h3":
            self.pending_folder = self._path().child(text)
        elif self.capture == "a" and self.link is not None:
            self.link.title = title_of(text)
            self.parsed.links.append(self.link)
            self.last_link, self.link = self.link, None
        elif self.capture == "dd" and self.last_link is not None:
            note = note_of(" ".join(text.split()))
            if note:
                self.last_link.metadata["description"] = note
        self._capture(None)

    def start(self, tag: str, attrib: Any) -> None:
        if self.capture == "dd" and tag in ("dt", "dl", "h3", "a"):
            self.close_capture()
        if tag == "dl":
            self._open_folder()
        elif tag == "h3":
            self.saw_structure = True
            self.pending_folder = None
            self._capture("h3")
        elif tag == "a":
            self._link(dict(attrib))
        elif tag == "dd":
            self._capture("dd")

    def _open_folder(self) -> None:
        self.saw_structure = True
        self.dl_opened += 1
        if len(self.stack) >= MAX_FOLDER_DEPTH:
            raise bad_file(self.line, f"folders nest deeper than {MAX_FOLDER_DEPTH} levels")
        if self.pending_folder is not None:
            self.folder_count += 1
            key = self.parsed.folder(f"n{self.folder_count}", self.pending_folder, self.line)
            self.stack.append((key, self.pending_folder))
            self.pending_folder = None
        else:
            self.stack.append(self.stack[-1] if self.stack else (None, FolderPath()))

    def _link(self, attr: dict[str, str]) -> None:
        self.saw_structure = True
        self.last_link = None
        if "href" not in attr:
            raise bad_file(self.line, "a bookmark (<A>) without HREF")
        url = check_url(self.parsed, self.line, attr["href"])
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
        self.link = Link(line=self.line, url=url, folders=[here] if here else [], metadata=meta)
        self._capture("a")

    def end(self, tag: str) -> None:
        if tag in ("h3", "a", "dd") and self.capture == tag:
            self.close_capture()
        elif tag == "dl":
            if self.capture == "dd":
                self.close_capture()
            if self.stack:
                self.stack.pop()

    def data(self, data: str) -> None:
        if self.capture is not None and self.captured < _KEEP:
            self.buffer.append(data[:_KEEP - self.captured])
            self.captured += len(self.buffer[-1])

    def close(self) -> None:
        return None


def parse_netscape(text: str) -> Parsed:
    """The folders and links of a Netscape bookmark file (400 `invalid_body` with `line` when it cannot be read)."""
    parsed = Parsed("netscape")
    reader = _Reader(parsed)
    parser = etree.HTMLParser(target=reader, recover=True, no_network=True, encoding="utf-8", remove_comments=True,
                              remove_pis=True, huge_tree=True)  # huge_tree: no 10 MB cliff (libxml2 then stalls)
    closed = 0
    line, pos = 1, 0
    while pos < len(text):
        # up to the end of the next line with a tag whose events need their line (<A, <DL, </DL)
        found = _NEEDS_LINE.search(text, pos)
        end = len(text) if found is None else text.find("\n", found.end())
        end = len(text) if end < 0 else end + 1
        reader.line = line if found is None else line + text.count("\n", pos, found.start())
        for piece in range(pos, end, FEED_CHARS):
            parser.feed(text[piece:min(end, piece + FEED_CHARS)].encode("utf-8"))
        if found is not None and found.group(1):  # libxml2 drops an end tag that closes nothing
            closed += len(_CLOSE_DL.findall(text, pos, end))
            if closed > reader.dl_opened:
                raise bad_file(reader.line, "</DL> closes a folder that was never opened")
        line += text.count("\n", pos, end)
        pos = end
    parser.close()
    if reader.capture is not None:
        reader.close_capture()
    if not reader.saw_structure:
        raise bad_file(1, "no bookmarks or folders found (expected <DL>, <H3> and <A HREF> elements)")
    return parsed
