"""Items as MCP resources: the template `lev://items/{item_id}` (`resources/templates/list`), the URIs it matches
(a page further on is `lev://items/{item_id}?offset=N`, as `get_item`'s next_offset), and the contents a read
answers: the item's text (a recording's transcript) from the offset, cut to the 64 KB `get_item` budget, with the
page's facts and the next page's URI in `_meta`. Pure: no I/O (the read itself is `lev.handlers.mcp`'s)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lev.core.errors import invalid_body
from lev.mcp import budget

SCHEME = "lev"
ITEM_TEMPLATE = "lev://items/{item_id}"
MIME_TYPE = "text/plain"
META_KEY = "lev/item"
TEMPLATES = [{
    "uriTemplate": ITEM_TEMPLATE, "name": "lev-item", "title": "An item of the knowledge base",
    "description": "One item's text (a recording's transcript) under this token's scope: item_id as search_knowledge_"
                   "base and list_recent give it. Long texts come in pages of at most 64 KB; _meta['lev/item'] says "
                   "where the next page starts (next_uri, read it to go on).",
    "mimeType": MIME_TYPE,
}]
_ITEM_PATH = re.compile(r"/([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})")


@dataclass(frozen=True)
class ItemRef:
    """An item URI, read: the item and the first character of the page."""
    item_id: uuid.UUID
    offset: int


def item_uri(item_id: str, offset: int = 0) -> str:
    return f"lev://items/{item_id}" + (f"?offset={offset}" if offset else "")


def parse_item_uri(uri: str) -> ItemRef | None:
    """The item a `lev://items/{item_id}[?offset=N]` URI names, None for any other URI; 400 invalid_body (-32602)
    for an offset that is not a whole number of at least 0."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return None
    found = _ITEM_PATH.fullmatch(parts.path)
    if parts.scheme != SCHEME or parts.netloc != "items" or found is None or parts.fragment:
        return None
    query = parse_qs(parts.query, keep_blank_values=True)
    if set(query) - {"offset"} or len(query.get("offset", [])) > 1:
        raise invalid_body("An item URI takes one query parameter, offset (lev://items/{item_id}?offset=N).")
    raw = query.get("offset", ["0"])[0]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise invalid_body("offset in an item URI must be a whole number of at least 0.")
    return ItemRef(uuid.UUID(found.group(1)), int(raw))


def contents(uri: str, page: dict[str, Any]) -> dict[str, Any]:
    """The `resources/read` result for one page of an item (`lev.library.reads.page`'s answer)."""
    text = page["text"] if page.get("text") is not None else page.get("transcript") or ""
    total = page["text_total_chars"] if page.get("text") is not None else page["transcript_total_chars"]
    next_offset = page["next_offset"]
    facts = {"item_id": page["id"], "title": page.get("title"), "url": page.get("url"), "kind": page.get("kind"),
             "offset": page["text_offset"], "total_chars": total, "next_offset": next_offset,
             "next_uri": item_uri(page["id"], next_offset) if next_offset is not None else None}
    return {"contents": [{"uri": uri, "mimeType": MIME_TYPE, "text": text, "_meta": {META_KEY: facts}}]}


def wire_bytes(result: dict[str, Any]) -> int:
    """The bytes of the whole `resources/read` answer carrying `result`."""
    return len(budget.dumps(result).encode("utf-8")) + budget.ENVELOPE_BYTES
