"""An item as Markdown, the way note-taking tools (Obsidian, Logseq, Notion) import it: YAML front matter (title,
source, when it was saved, Lev's id, its tags), the title, the highlights as quotes with their notes below them, then
the item's text. Raw HTML in the texts (a tag, a comment) is escaped, so a tool that renders HTML shows it as words
and runs nothing; Markdown's own syntax is kept."""

from __future__ import annotations

import json
import re
from typing import Any

_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # where HTML would begin: a tag, a closing tag, a comment or declaration
_URL_UNSAFE = re.compile(r"[<>\s]")


def plain(text: str) -> str:
    """`text` with every start of raw HTML escaped (`\\<`, CommonMark's escape): "a < b" is left as it is."""
    return _TAG_START.sub(r"\\<", text)


def _yaml(value: Any) -> str:
    """A JSON string, a valid YAML scalar; `<` as its `\\u003c` escape (the same value, no tag in the file)."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c")


def _quote(text: str) -> str:
    return "\n".join(f"> {plain(line)}".rstrip() for line in text.strip().splitlines())


def filename(title: str | None, item_id: str) -> str:
    """A portable file name for the download: the title's words, else the id."""
    words = re.sub(r"[^\w\- ]+", "", title or "", flags=re.UNICODE).strip()
    words = re.sub(r"\s+", " ", words)[:80].strip()
    return f"{words or item_id}.md"


def render(item: dict[str, Any], highlights: list[dict[str, Any]]) -> str:
    """The Markdown of `item` (get_item's shape) with `highlights` (in the order of the text)."""
    title = item.get("title") or item.get("url") or "Untitled"
    front = ["---", f"title: {_yaml(title)}"]
    if item.get("url"):
        front.append(f"source: {_yaml(item['url'])}")
    front += [f"saved: {_yaml(item['created_at'])}", f"kind: {_yaml(item['kind'])}",
              f"lev_item_id: {_yaml(item['id'])}"]
    if item.get("tags"):  # a YAML flow sequence of JSON strings, as Obsidian and Lev's own import read `tags:`
        front.append(f"tags: [{', '.join(_yaml(t) for t in item['tags'])}]")
    front += ["---", ""]
    out = front + [f"# {plain(' '.join(title.split()))}", ""]
    if item.get("url"):
        out += [f"<{_URL_UNSAFE.sub(lambda m: f'%{ord(m.group()):02X}', item['url'])}>", ""]
    if highlights:
        out += ["## Highlights", ""]
        for h in highlights:
            out += [_quote(h["text"]), ""]
            if h.get("note"):
                out += [plain(h["note"].strip()), ""]
    body = item.get("text") or item.get("transcript") or ""
    if body.strip():  # each line of the text a paragraph (Markdown joins lines without a blank one between)
        paragraphs = "\n\n".join(plain(line.strip()) for line in body.splitlines() if line.strip())
        out += ["## Transcript" if not item.get("text") else "## Text", "", paragraphs, ""]
    return "\n".join(out)
