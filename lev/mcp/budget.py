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
             chars: int = DEFAULT_PAGE_CHARS, weigh: Callable[[dict[str, Any]], int] = wire_bytes) -> dict[str, Any]:
    """The longest page of at most `chars` characters (`paged(n)`: the answer with n characters) whose answer fits
    the budget (`weigh`: its bytes on the wire, a tool result's by default); a page of one character when even that
    does not fit (its other fields are too large)."""
    answer = paged(chars)
    size = weigh(answer)
    while size > budget and chars > 1:
        chars = max(1, min(chars - 1, int(chars * budget / size * 0.97)))
        answer = paged(chars)
        size = weigh(answer)
    return answer


KEPT_CHARS = 200  # a passage or note is never cut shorter


def _water_level(lengths: list[int], total: int) -> int:
    """The largest cap C with sum(min(n, C)) <= total: cutting only what is longer than C, longest first."""
    if sum(lengths) <= total:
        return max(lengths, default=0)
    lo, hi = 0, max(lengths)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= total:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _cut_to(results: list[dict[str, Any]], cap: int) -> None:
    """Every passage and note longer than `cap` characters (never below KEPT_CHARS) cut from its end;
    `location.char_end` follows a passage, so the item's text sliced with the location is still the passage."""
    cap = max(cap, KEPT_CHARS)
    for r in results:
        for field in ("text", "note"):
            value = r.get(field)
            if not isinstance(value, str) or len(value) <= cap:
                continue
            r[field] = value[:cap].rstrip() or value[:cap]
            r["truncated"] = True
            where = r.get("location")
            if field == "text" and isinstance(where, dict) and where.get("char_start") is not None:
                r["location"] = {**where, "char_end": where["char_start"] + len(r["text"])}


def fit_search(answer: dict[str, Any], limit: int) -> dict[str, Any]:
    """A search answer whose longest passages and notes are shortened (longest first, to one common length) until it
    fits the budget of `limit` passages. A few serialisations in all, whatever the answer's size: the length is
    found from the bytes the long fields weigh, then checked."""
    budget = SEARCH_BYTES * max(1, -(-limit // 10))
    results = [dict(r) for r in answer["results"]]
    shaped = {**answer, "results": results}
    size = wire_bytes(shaped)
    for _ in range(6):
        if size <= budget:
            break
        lengths = [len(r[f]) for r in results for f in ("text", "note") if isinstance(r.get(f), str)]
        longest = max(lengths, default=0)
        if longest <= KEPT_CHARS:
            break
        floor = {**shaped, "results": [dict(r) for r in results]}
        _cut_to(floor["results"], KEPT_CHARS)
        fixed = wire_bytes(floor)  # the answer with every long field at its shortest
        if fixed >= budget:
            _cut_to(results, KEPT_CHARS)
            break
        spare = [n - KEPT_CHARS for n in lengths if n > KEPT_CHARS]
        keep = int(sum(spare) * (budget - fixed) / (size - fixed) * 0.97)
        _cut_to(results, KEPT_CHARS + _water_level(spare, keep))
        size = wire_bytes(shaped)
    return shaped
