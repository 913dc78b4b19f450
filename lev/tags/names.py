"""The tag names a surface accepts: a name is at most 64 characters in its one form (`lev.store.tags.normal_form`:
parts between `/` trimmed, white space collapsed, a leading `#` dropped), without control characters; an item
carries at most 100 tags. A bad name is 400 invalid_body naming the parameter; what imports bring is cut to fit
instead (`lenient`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lev.core.errors import invalid_body
from lev.store.tags import CONTROL, MAX_NAME_CHARS, MAX_PER_ITEM, clean_name, key_of, normal_form


def check_name(raw: Any, parameter: str = "tags") -> str:
    """One name in its one form, or 400 invalid_body saying what is wrong with it."""
    if not isinstance(raw, str):
        raise invalid_body(f"{parameter}: a tag is a string.", parameter=parameter)
    if CONTROL.search(raw):
        raise invalid_body(f"{parameter}: a tag must not contain control characters.", parameter=parameter)
    name = normal_form(raw)
    if not name:
        raise invalid_body(f"{parameter}: a tag needs a name (not only white space, #, / or parts that are . or ..).",
                           parameter=parameter)
    if len(name) > MAX_NAME_CHARS:
        raise invalid_body(f"{parameter}: a tag is at most {MAX_NAME_CHARS} characters ({name[:40]!r}… has "
                           f"{len(name)}).", parameter=parameter)
    return name


def check_names(values: Any, parameter: str = "tags") -> list[str]:
    """Names in their one form, each key once (its first spelling), at most 100; else 400 invalid_body."""
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise invalid_body(f"{parameter} must be a list of tag names.", parameter=parameter)
    names = _distinct(check_name(v, parameter) for v in values)
    if len(names) > MAX_PER_ITEM:
        raise invalid_body(f"{parameter}: an item carries at most {MAX_PER_ITEM} tags.", parameter=parameter)
    return names


def lenient(values: Iterable[Any]) -> list[str]:
    """What an import file or a document says the tags are, cut to fit: names that are not strings or are empty
    are dropped, long ones cut to 64 characters, at most 100."""
    return _distinct(n for n in (clean_name(v, lenient=True) for v in values if isinstance(v, str)) if n)[
        :MAX_PER_ITEM]


def _distinct(names: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for name in names:
        seen.setdefault(key_of(name), name)
    return list(seen.values())
