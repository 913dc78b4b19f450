"""What a tool's answer weighs on the wire, and answers cut to fit: a `get_item` page under 64 KB by default, a
search of 10 passages under 32 KB. A tool result carries its object twice (`content[0].text` as JSON text and
`structuredContent`), so both count. Pure: no I/O."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

GET_ITEM_BYTES = 64 * 1024
SEARCH_BYTES = 32 * 1024  # for 10 passages; a larger limit gets as much again per 10
DEFAULT_PAGE_CHARS = 20_000
ENVELOPE_BYTES = 600  # the JSON-RPC envelope, a long request id, a 2026-07-28 result's _meta, SSE framing


def dumps(obj: Any) -> str:
    """JSON as Lev's MCP answers are written: UTF-8 characters as they are, no spaces between tokens."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def wire(obj: Any) -> bytes:
    """The UTF-8 bytes of an answer; one holding a lone surrogate (a client's request id may) is written with
    `\\u` escapes instead, which JSON allows and UTF-8 cannot carry."""
    try:
        return dumps(obj).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":")).encode("ascii")


def tool_result(obj: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """A successful tool result: the object as JSON text and as structured content."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": dumps(obj)}], "structuredContent": obj,
                              "isError": False}
    if meta:
        result["_meta"] = meta
    return result


def wire_bytes(obj: dict[str, Any]) -> int:
    """The bytes of the whole answer carrying `obj` as a tool result."""
    return len(dumps(tool_result(obj)).encode("utf-8")) + ENVELOPE_BYTES


def fit_page(paged: Callable[[int], dict[str, Any]], budget: int = GET_ITEM_BYTES,
             chars: int = DEFAULT_PAGE_CHARS) -> dict[str, Any]:
    """The longest page of at most `chars` characters (`paged(n)`: the answer with n characters) whose answer fits
    the budget; a page of one character when even that does not fit (its other fields are too large)."""
    answer = paged(chars)
    size = wire_bytes(answer)
    while size > budget and chars > 1:
        chars = max(1, min(chars - 1, int(chars * budget / size * 0.97)))
        answer = paged(chars)
        size = wire_bytes(answer)
    return answer


def fit_search(answer: dict[str, Any], limit: int) -> dict[str, Any]:
    """A search answer whose longest passages are shortened (from their end; `location.char_end` follows, so the
    item's text sliced with the location is still the passage) until it fits the budget of `limit` passages."""
    budget = SEARCH_BYTES * max(1, -(-limit // 10))
    results = [dict(r) for r in answer["results"]]
    shaped = {**answer, "results": results}
    size = wire_bytes(shaped)
    while size > budget:
        longest = max(results, key=lambda r: len(r["text"]), default=None)
        if longest is None or len(longest["text"]) <= 200:
            break
        keep = max(200, int(len(longest["text"]) * 0.8))
        longest["text"] = longest["text"][:keep].rstrip() or longest["text"][:keep]
        where = longest.get("location")
        if isinstance(where, dict) and where.get("char_start") is not None:
            longest["location"] = {**where, "char_end": where["char_start"] + len(longest["text"])}
        longest["truncated"] = True
        size = wire_bytes(shaped)
    return shaped
