"""Where a highlight's words are in an item's text: at the offsets given when they hold those words, else the
occurrence nearest them (the first without offsets). Runs of whitespace match any run of whitespace, so a
selection copied from the live page (other line breaks, spaces) finds the passage Lev extracted.

Linear in the text: the text is spaced once (each run of whitespace one space, with the way back to its offsets)
and the words are found by plain substring search, which CPython does in linear time forwards (the nearest
occurrence before a place is a forward search of the reversed text: `rfind` is quadratic at worst)."""

from __future__ import annotations

from typing import Any

import numpy as np

from lev.core.errors import ApiError, invalid_body

SHOWN = 80  # characters of unfound words the message quotes
# str.isspace() and the regular expressions' \s agree on every code point; all such lie below U+3001 (U+3000).
_SPACE = np.zeros(0x3001, dtype=bool)
_SPACE[[c for c in range(0x3001) if chr(c).isspace()]] = True


class Spaced:
    """A text with each run of whitespace as one space (`flat`), and each of its characters' offset in the text."""

    def __init__(self, body: str) -> None:
        self.body = body
        self._reversed: str | None = None
        codes = np.frombuffer(body.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        space = np.zeros(len(codes), dtype=bool)
        low = codes < len(_SPACE)
        space[low] = _SPACE[codes[low]]
        kept = ~space
        kept[0:1] |= space[0:1]
        kept[1:] |= space[1:] & ~space[:-1]
        self.offsets = np.flatnonzero(kept)  # the text's offset of each character of `flat`
        flat = codes[self.offsets]
        flat[space[self.offsets]] = ord(" ")
        self.flat = flat.tobytes().decode("utf-32-le", "surrogatepass")

    def holds(self, needle: str, start: int, end: int) -> bool:
        """Whether the text's characters start:end are the words of `needle` (a spaced phrase) and nothing else."""
        if not (0 <= start < end <= len(self.body)):
            return False
        part = self.body[start:end]
        return not part[0].isspace() and not part[-1].isspace() and " ".join(part.split()) == needle

    def _span(self, at: int, needle: str) -> tuple[int, int]:
        return int(self.offsets[at]), int(self.offsets[at + len(needle) - 1]) + 1

    def find(self, needle: str, hint: int | None) -> tuple[int, int] | None:
        """(start, end) in the text of the occurrence of `needle` nearest `hint` (ties to the earlier; the first
        without a hint), or None."""
        if hint is None:
            at = self.flat.find(needle)
            return None if at < 0 else self._span(at, needle)
        near = int(np.searchsorted(self.offsets, hint))  # flat characters before the hint
        after = self.flat.find(needle, near)
        if self._reversed is None:
            self._reversed = self.flat[::-1]
        # the last occurrence starting before `near` is the first of the reversed needle ending after it
        cut = len(self.flat) - (near - 1 + len(needle))
        back = self._reversed.find(needle[::-1], max(cut, 0)) if near > 0 else -1
        before = len(self.flat) - back - len(needle) if back >= 0 else -1
        spans = [self._span(at, needle) for at in (before, after) if at >= 0]
        return min(spans, key=lambda sp: (abs(sp[0] - hint), sp[0])) if spans else None


def phrase(words: str) -> str:
    """The words as one spaced phrase, or 400 invalid_body when there are none."""
    needle = " ".join(words.split())
    if not needle:
        raise invalid_body("text must hold some words of the item.")
    return needle


def locate_in(text: Spaced, words: str, char_start: int | None = None,
              char_end: int | None = None) -> tuple[int, int]:
    """(start, end) of `words` in the text, or 409 words_not_found saying the words are not in the item."""
    needle = phrase(words)
    if char_start is not None and char_end is not None and text.holds(needle, char_start, char_end):
        return char_start, char_end
    hint = char_start if char_start is not None else (
        max(0, char_end - len(words.strip())) if char_end is not None else None)
    found = text.find(needle, hint)
    if found is None:
        quoted = needle if len(needle) <= SHOWN else needle[:SHOWN] + "…"
        raise ApiError("words_not_found", f"These words are not in the item's text: “{quoted}”.")
    return found


def locate(body: str, words: str, char_start: int | None = None, char_end: int | None = None) -> tuple[int, int]:
    """(start, end) of `words` in `body`, or 409 words_not_found saying the words are not in the item."""
    phrase(words)
    return locate_in(Spaced(body), words, char_start, char_end)


def relocate(body: str, marks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The highlights of an item whose text changed (a page captured again): those whose words are still there,
    moved to the occurrence nearest their old place (`char_start`, `char_end`, `text` updated), and those whose
    words are gone."""
    text = Spaced(body)
    kept, lost = [], []
    for h in marks:
        try:
            start, end = locate_in(text, h["text"], h["char_start"], h["char_end"])
        except ApiError:
            lost.append(h)
            continue
        kept.append({**h, "char_start": start, "char_end": end, "text": body[start:end]})
    return kept, lost
