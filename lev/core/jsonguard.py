"""The one JSON parser for request bodies (REST and MCP): refuses what would crash a request, could not be stored,
or would cost more than its size justifies.

Refused: bodies that are not UTF-8 JSON, more than `MAX_VALUES` values (array items, object members and containers
together: no operation takes more than a few hundred, and a 2 MB array of small numbers is a million), nesting
deeper than `MAX_DEPTH`, `NaN`/`Infinity`, numbers beyond a 64-bit integer or a finite double, and strings (keys
included) holding NUL or a lone UTF-16 surrogate (`"\\ud800"`), which PostgreSQL text and UTF-8 cannot hold.
The count is taken before parsing (in linear time, at C speed), so parsing and walking a body are bounded whatever
it holds; `loads_off_loop` runs large bodies in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any

import numpy as np

MAX_DEPTH = 32
MAX_VALUES = 10_000
INT_LIMIT = 2**63
OFF_LOOP_BYTES = 64 * 1024  # bodies above this are parsed in a worker thread
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")
_BAD_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")


class BadJson(ValueError):
    """A body the service refuses; `parsed` says whether it was JSON at all (MCP: -32602 vs -32700)."""

    def __init__(self, message: str, *, parsed: bool, document: Any = None) -> None:
        super().__init__(message)
        self.parsed = parsed
        self.document = document


class _OutOfRange:
    """A number JSON allows but we do not (checked after parsing, so the document's shape is known)."""

    def __init__(self, message: str) -> None:
        self.message = message


def _int(text: str) -> int | _OutOfRange:
    if len(text.lstrip("-")) > 20:  # int() of thousands of digits is slow, and refused past 4300
        return _OutOfRange("numbers must fit in a 64-bit integer")
    value = int(text)
    if not -INT_LIMIT <= value < INT_LIMIT:
        return _OutOfRange("numbers must fit in a 64-bit integer")
    return value


def _float(text: str) -> float | _OutOfRange:
    value = float(text)
    if not math.isfinite(value):
        return _OutOfRange("numbers must be finite")
    return value


def _constant(name: str) -> Any:
    raise BadJson(f"{name} is not JSON", parsed=False)


def value_count(text: str) -> int:
    """How many values `text` holds at most: its commas, `[` and `{` outside strings (and one more)."""
    count = text.count(",") + text.count("[") + text.count("{")
    if count <= MAX_VALUES:
        return count + 1
    quotes, backslashes = text.count('"'), text.count("\\")
    if (quotes - backslashes) // 2 > MAX_VALUES:  # at least this many strings (keys included)
        return (quotes - backslashes) // 2
    return _count_outside_strings(text.encode("utf-8", "surrogatepass")) + 1


def _count_outside_strings(data: bytes) -> int:
    """Commas, `[` and `{` outside strings, in a few vector passes over the bytes (NumPy lets other threads run:
    one regular expression over a 10 MB body held the event loop 1.8 s). A quote ends or starts a string unless an
    odd run of backslashes stands before it; UTF-8 never hides these ASCII bytes inside another character."""
    b = np.frombuffer(data, dtype=np.uint8)
    n = len(b)
    at = np.arange(n)
    slash = b == ord("\\")
    last_other = np.maximum.accumulate(np.where(slash, -1, at))  # the last position at or before i that is no "\\"
    run_before = np.empty(n, dtype=np.int64)  # backslashes right before i
    run_before[:1] = 0
    run_before[1:] = at[:-1] - last_other[:-1]
    quote = (b == ord('"')) & (run_before % 2 == 0)
    outside = np.cumsum(quote) % 2 == 0  # a comma or bracket is never a quote: the count up to it decides
    wanted = (b == ord(",")) | (b == ord("[")) | (b == ord("{"))
    return int(np.count_nonzero(wanted & outside))


def loads(raw: bytes | str, *, max_values: int = MAX_VALUES) -> Any:
    """The parsed document, or BadJson saying what is wrong with it."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadJson("the body is not UTF-8 encoded JSON", parsed=False) from None
    if value_count(raw) > max_values:
        raise BadJson(f"JSON with more than {max_values} values (array items and object members) is refused",
                      parsed=True)  # JSON, but refused whole: MCP answers -32602 like any invalid body
    try:
        document = json.loads(raw, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except RecursionError:
        raise BadJson(f"JSON nested deeper than {MAX_DEPTH} levels is refused", parsed=False) from None
    except json.JSONDecodeError as exc:
        raise BadJson(f"the body is not valid JSON: {exc}", parsed=False) from None
    strings = _BAD_ESCAPE.search(raw) is not None or _BAD_CHARS.search(raw) is not None
    problem = _problem(document, strings)
    if problem is not None:
        raise BadJson(problem, parsed=True, document=document)
    return document


async def loads_off_loop(raw: bytes, *, max_values: int = MAX_VALUES) -> Any:
    """`loads`, in a worker thread when the body is large (the event loop keeps serving other requests)."""
    if len(raw) <= OFF_LOOP_BYTES:
        return loads(raw, max_values=max_values)
    return await asyncio.to_thread(loads, raw, max_values=max_values)


def _where(path: list[str | int]) -> str:
    where = ".".join(str(p) for p in path) or "the body"
    return where if len(where) <= 100 else where[:100] + "…"


def _problem(document: Any, strings: bool) -> str | None:
    """What is wrong with a parsed document, walked without recursion; None when nothing is. Strings are looked at
    only when the text could hold a bad one (`strings`: it has a NUL or surrogate escape, or such a character)."""
    stack: list[tuple[Any, list[str | int]]] = [(document, [])]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            return f"JSON nested deeper than {MAX_DEPTH} levels is refused"
        if isinstance(value, _OutOfRange):
            return f"{_where(path)}: {value.message}"
        if isinstance(value, str):
            bad = _BAD_CHARS.search(value) if strings else None
            if bad is not None:
                what = "NUL characters" if bad.group() == "\x00" else "lone UTF-16 surrogates"
                return f"{_where(path)} must not contain {what}"
        elif isinstance(value, dict):
            for key, item in value.items():
                if strings and _BAD_CHARS.search(key):
                    return f"keys in {_where(path)} must not contain NUL characters or lone UTF-16 surrogates"
                stack.append((item, [*path, key]))
        elif isinstance(value, list):
            stack.extend((item, [*path, i]) for i, item in enumerate(value))
    return None
