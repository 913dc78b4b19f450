"""The one JSON parser for request bodies (REST and MCP): refuses what would crash a request or could not be stored.

Refused: bodies that are not UTF-8 JSON, nesting deeper than `MAX_DEPTH`, `NaN`/`Infinity`, numbers beyond a
64-bit integer or a finite double, and strings (keys included) holding NUL or a lone UTF-16 surrogate
(`"\\ud800"`), which PostgreSQL text and UTF-8 cannot hold.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 32
INT_LIMIT = 2**63
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


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


def loads(raw: bytes | str) -> Any:
    """The parsed document, or BadJson saying what is wrong with it."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadJson("the body is not UTF-8 encoded JSON", parsed=False) from None
    try:
        document = json.loads(raw, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except RecursionError:
        raise BadJson(f"JSON nested deeper than {MAX_DEPTH} levels is refused", parsed=False) from None
    except json.JSONDecodeError as exc:
        raise BadJson(f"the body is not valid JSON: {exc}", parsed=False) from None
    problem = _problem(document)
    if problem is not None:
        raise BadJson(problem, parsed=True, document=document)
    return document


def _where(path: list[str | int]) -> str:
    where = ".".join(str(p) for p in path) or "the body"
    return where if len(where) <= 100 else where[:100] + "…"


def _problem(document: Any) -> str | None:
    """What is wrong with a parsed document, walked without recursion; None when nothing is."""
    stack: list[tuple[Any, list[str | int]]] = [(document, [])]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            return f"JSON nested deeper than {MAX_DEPTH} levels is refused"
        if isinstance(value, _OutOfRange):
            return f"{_where(path)}: {value.message}"
        if isinstance(value, str):
            bad = _BAD_CHARS.search(value)
            if bad is not None:
                what = "NUL characters" if bad.group() == "\x00" else "lone UTF-16 surrogates"
                return f"{_where(path)} must not contain {what}"
        elif isinstance(value, dict):
            for key, item in value.items():
                if _BAD_CHARS.search(key):
                    return f"keys in {_where(path)} must not contain NUL characters or lone UTF-16 surrogates"
                stack.append((item, [*path, key]))
        elif isinstance(value, list):
            stack.extend((item, [*path, i]) for i, item in enumerate(value))
    return None
