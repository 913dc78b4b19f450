"""Where a highlight's words are in an item's text: at the offsets given when they hold those words, else the
occurrence nearest them (the first without offsets). Runs of whitespace match any run of whitespace, so a
selection copied from the live page (other line breaks, spaces) finds the passage Lev extracted."""

from __future__ import annotations

import re
from typing import Any

from lev.core.errors import ApiError, invalid_body

SHOWN = 80  # characters of unfound words the message quotes


def pattern(words: str) -> re.Pattern[str]:
    """The words as a pattern in which each run of whitespace matches any run of whitespace."""
    parts = words.split()
    if not parts:
        raise invalid_body("text must hold some words of the item.")
    return re.compile(r"\s+".join(re.escape(p) for p in parts))


def locate(body: str, words: str, char_start: int | None = None, char_end: int | None = None) -> tuple[int, int]:
    """(start, end) of `words` in `body`, or 400 invalid_body saying the words are not in the item."""
    found = pattern(words)
    if char_start is not None and char_end is not None and 0 <= char_start < char_end <= len(body) \
            and found.fullmatch(body, char_start, char_end):
        return char_start, char_end
    hint = char_start if char_start is not None else (
        max(0, char_end - len(words.strip())) if char_end is not None else None)
    best: tuple[int, tuple[int, int]] | None = None
    for m in found.finditer(body):
        if hint is None:
            return m.span()
        distance = abs(m.start() - hint)
        if best is None or distance < best[0]:
            best = (distance, m.span())
        if m.start() >= hint:
            break  # later occurrences lie further away
    if best is None:
        quoted = " ".join(words.split())
        quoted = quoted if len(quoted) <= SHOWN else quoted[:SHOWN] + "…"
        raise invalid_body(f"These words are not in the item's text: “{quoted}”.")
    return best[1]


def relocate(body: str, marks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The highlights of an item whose text changed (a page captured again): those whose words are still there,
    moved to the occurrence nearest their old place (`char_start`, `char_end`, `text` updated), and those whose
    words are gone."""
    kept, lost = [], []
    for h in marks:
        try:
            start, end = locate(body, h["text"], h["char_start"], h["char_end"])
        except ApiError:
            lost.append(h)
            continue
        kept.append({**h, "char_start": start, "char_end": end, "text": body[start:end]})
    return kept, lost
