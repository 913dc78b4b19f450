"""Import files as their makers write them: Chromium's bookmark export (bookmark_html_writer.cc: CRLF, 4-space
indents, ADD_DATE / LAST_MODIFIED, the bookmark bar with PERSONAL_TOOLBAR_FOLDER and the children of "Other
bookmarks" one level up), Pocket's CSV export and Raindrop.io's CSV export."""

from __future__ import annotations

import csv
import html
import io
from typing import Any

# a bookmark tree: ("link", title, url) or ("folder", name, [children])
Node = tuple[Any, ...]

HEADER = ("<!DOCTYPE NETSCAPE-Bookmark-file-1>\r\n<!-- This is an automatically generated file.\r\n"
          "     It will be read and overwritten.\r\n     DO NOT EDIT! -->\r\n"
          '<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=UTF-8">\r\n'
          "<TITLE>Bookmarks</TITLE>\r\n<H1>Bookmarks</H1>\r\n<DL><p>\r\n")


def chromium_bookmarks(bar: list[Node], other: list[Node] | None = None, *, added: int = 1_700_000_000) -> bytes:
    """The bytes Chromium writes for a bookmark bar holding `bar` and "Other bookmarks" holding `other`."""
    out = [HEADER]
    clock = [added]

    def stamp() -> str:
        clock[0] += 1
        return str(clock[0])

    def write(node: Node, depth: int) -> None:
        pad = " " * (4 * depth)
        if node[0] == "link":
            out.append(f'{pad}<DT><A HREF="{node[2].replace(chr(34), "&quot;")}" ADD_DATE="{stamp()}">'
                       f"{html.escape(node[1])}</A>\r\n")
            return
        out.append(f'{pad}<DT><H3 ADD_DATE="{stamp()}" LAST_MODIFIED="{stamp()}">{html.escape(node[1])}</H3>\r\n')
        out.append(f"{pad}<DL><p>\r\n")
        for child in node[2]:
            write(child, depth + 1)
        out.append(f"{pad}</DL><p>\r\n")

    out.append(f'    <DT><H3 ADD_DATE="{stamp()}" LAST_MODIFIED="{stamp()}" PERSONAL_TOOLBAR_FOLDER="true">'
               "Bookmarks bar</H3>\r\n    <DL><p>\r\n")
    for node in bar:
        write(node, 2)
    out.append("    </DL><p>\r\n")
    for node in other or []:
        write(node, 1)
    out.append("</DL><p>\r\n")
    return "".join(out).encode()


def pocket_csv(rows: list[dict[str, str]]) -> bytes:
    """Pocket's export: title,url,time_added,tags,status (tags joined with |; status unread or archive)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["title", "url", "time_added", "tags", "status"])
    for r in rows:
        w.writerow([r.get("title", ""), r["url"], r.get("time_added", "1700000000"), r.get("tags", ""),
                    r.get("status", "unread")])
    return buf.getvalue().encode()


def raindrop_csv(rows: list[dict[str, str]]) -> bytes:
    """Raindrop.io's export: id,title,note,excerpt,url,folder,tags,created,cover,highlights,favorite."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(["id", "title", "note", "excerpt", "url", "folder", "tags", "created", "cover", "highlights",
                "favorite"])
    for i, r in enumerate(rows):
        w.writerow([str(1000 + i), r.get("title", ""), r.get("note", ""), r.get("excerpt", ""), r["url"],
                    r.get("folder", "Unsorted"), r.get("tags", ""), r.get("created", "2024-05-01T10:00:00.000Z"),
                    "", "", r.get("favorite", "false")])
    return buf.getvalue().encode()
