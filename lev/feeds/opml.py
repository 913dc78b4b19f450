"""OPML 2.0, the feed readers' exchange format: reading a subscription list (each `<outline xmlUrl>` a feed, the
outlines around it its folder, nested ones as `Parent / Child`) and writing the user's feeds, grouped by folder."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from email.utils import format_datetime
from typing import Any
from xml.parsers import expat

from lev.core import clock
from lev.core.errors import invalid_body
from lev.core.xmltext import xml_text
from lev.feeds.xmlguard import EntitiesForbidden, forbid_entities

MAX_FEEDS = 1000


@dataclass
class Outline:
    line: int
    url: str
    title: str | None
    folder: str | None


def _attr(attrs: dict[str, str], name: str) -> str:
    return next((v for k, v in attrs.items() if k.lower() == name.lower()), "").strip()


def parse(data: bytes) -> list[Outline]:
    """The feeds an OPML file lists; 400 invalid_body naming the line when it is not OPML."""
    found: list[Outline] = []
    groups: list[str | None] = []
    root: list[str] = []
    parser = expat.ParserCreate()
    forbid_entities(parser)

    def start(tag: str, attrs: dict[str, str]) -> None:
        line = parser.CurrentLineNumber
        if not root:
            root.append(tag)
            if tag.lower() != "opml":
                raise invalid_body(f"Line {line}: this is not OPML (the document is <{tag[:50]}>, not <opml>).",
                                   line=line)
            return
        if tag.lower() != "outline":
            return
        url = _attr(attrs, "xmlUrl")
        label = _attr(attrs, "title") or _attr(attrs, "text") or None
        if url:
            folder = " / ".join(g for g in groups if g) or None
            found.append(Outline(line, url, label[:500] if label else None, folder[:200] if folder else None))
            if len(found) > MAX_FEEDS:
                raise invalid_body(f"Line {line}: an OPML import holds at most {MAX_FEEDS} feeds.", line=line)
        groups.append(None if url else label)

    def end(tag: str) -> None:
        if tag.lower() == "outline" and groups:
            groups.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except EntitiesForbidden as exc:
        raise invalid_body(f"Line {exc.line}: the file declares XML entities; OPML files with entity declarations "
                           "are not read.", line=exc.line) from None
    except expat.ExpatError as exc:
        raise invalid_body(f"Line {exc.lineno}: the file is not well-formed XML ({expat.ErrorString(exc.code)}), "
                           "so it is not OPML.", line=max(1, exc.lineno)) from None
    if not root:
        raise invalid_body("Line 1: the file is empty, not OPML.", line=1)
    return found


def render(feeds: list[dict[str, Any]], folder_names: dict[str, str]) -> bytes:
    """An OPML 2.0 document of `feeds` (shaped as the API shows them), those in a folder under its outline."""
    opml = ET.Element("opml", version="2.0")
    head = ET.SubElement(opml, "head")
    ET.SubElement(head, "title").text = "Lev feeds"
    ET.SubElement(head, "dateCreated").text = format_datetime(clock.now(), usegmt=True)
    body = ET.SubElement(opml, "body")
    groups: dict[str, ET.Element] = {}
    for feed in feeds:
        parent = body
        name = xml_text(folder_names.get(feed["folder_id"] or "", ""))
        if name:
            if name not in groups:
                groups[name] = ET.SubElement(body, "outline", text=name, title=name)
            parent = groups[name]
        title = xml_text(feed["title"] or feed["url"])
        attrs = {"type": "rss", "text": title, "title": title, "xmlUrl": xml_text(feed["url"])}
        if feed.get("site_url"):
            attrs["htmlUrl"] = xml_text(feed["site_url"])
        ET.SubElement(parent, "outline", attrs)
    ET.indent(opml)
    return ET.tostring(opml, encoding="utf-8", xml_declaration=True) + b"\n"
