"""An item as Markdown, the way note-taking tools (Obsidian, Logseq, Notion) import it: YAML front matter (title,
source, when it was saved, Lev's id), the title, the highlights as quotes with their notes below them, then the
item's text."""

from __future__ import annotations

import json
import re
from typing import Any


def _yaml(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid YAML scalar


def _quote(text: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in text.strip().splitlines())


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
              f"lev_item_id: {_yaml(item['id'])}", "---", ""]
    out = front + [f"# {' '.join(title.split())}", ""]
    if item.get("url"):
        out += [f"<{item['url']}>", ""]
    if highlights:
        out += ["## Highlights", ""]
        for h in highlights:
            out += [_quote(h["text"]), ""]
            if h.get("note"):
                out += [h["note"].strip(), ""]
    body = item.get("text") or item.get("transcript") or ""
    if body.strip():  # each line of the text a paragraph (Markdown joins lines without a blank one between)
        paragraphs = "\n\n".join(line.strip() for line in body.splitlines() if line.strip())
        out += ["## Transcript" if not item.get("text") else "## Text", "", paragraphs, ""]
    return "\n".join(out)
