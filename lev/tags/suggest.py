"""The tags an item's page suggests, one click to accept and never applied without the user: first the user's own
tags whose words the item's title or text holds (most used first), then the item's key phrases (the local
transform's output when it ran, else the phrases that output is chosen from, most frequent first); never a tag the
item carries, at most `MAX_SUGGESTIONS`."""

from __future__ import annotations

import re
from typing import Any

from lev.auth.policy import Principal
from lev.plumbing.deps import Deps
from lev.store import tags as tag_store
from lev.transforms.service import frequent_phrases

MAX_SUGGESTIONS = 8
TEXT_CHARS = 200_000  # of the item's text read for suggestions
_WORD = re.compile(r"\w+")


def _grams(text: str, longest: int = 4) -> set[tuple[str, ...]]:
    """Every run of 1 to `longest` words of `text`, case-folded."""
    words = [w.casefold() for w in _WORD.findall(text)]
    return {tuple(words[i:i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)}


def suggestions(item: dict[str, Any], used: list[tuple[str, int]]) -> list[str]:
    """What to suggest for `item` (its title, text, tags and outputs) given the user's tags in use, most used
    first. Pure."""
    have = {tag_store.key_of(t) for t in item.get("tags") or []}
    body = f"{item.get('title') or ''}\n{(item.get('text') or item.get('transcript') or '')[:TEXT_CHARS]}"
    grams = _grams(body)
    out: dict[str, str] = {}

    def offer(name: str | None) -> None:
        if name and tag_store.key_of(name) not in have and tag_store.key_of(name) not in out:
            out[tag_store.key_of(name)] = name

    for name, _count in used:
        leaf = tuple(w.casefold() for w in _WORD.findall(name.rsplit("/", 1)[-1]))
        if leaf and leaf in grams:
            offer(name)
        if len(out) >= MAX_SUGGESTIONS // 2:  # leave room for the item's own phrases
            break
    phrases = next((o["content"] for o in item.get("outputs") or []
                    if o.get("kind") == "key_phrases" and isinstance(o.get("content"), list)), None)
    for phrase in phrases or frequent_phrases(body, 3 * MAX_SUGGESTIONS):
        if len(out) >= MAX_SUGGESTIONS:
            break
        if isinstance(phrase, str):
            offer(tag_store.clean_name(phrase.casefold(), lenient=True))
    return list(out.values())


async def for_item(deps: Deps, principal: Principal, item: dict[str, Any]) -> list[str]:
    """The suggestions for an item of the caller's own (none for an item another member saved: its tags are
    theirs)."""
    async with deps.db.read_session() as s:
        used = await tag_store.used_names(s, principal.user_id)
    return suggestions(item, used)
