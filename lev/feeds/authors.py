"""feedparser's author pattern bounded: feedparser finds the e-mail address in an author's text with a pattern whose
search is quadratic in the text's length (a 16,000-character author took 5-20 s, holding the GIL). The same pattern,
with its runs bounded by what an address may hold (64 characters before the @, labels of 63, at most 8 of them), is
linear; an author's text is looked at in its first 1,024 characters only (Lev reads no author: the address is kept
as feedparser would). Importing this module puts it in feedparser's place (feedparser is pinned)."""

from __future__ import annotations

import re
from typing import Any

import feedparser
import feedparser.mixin

_EMAIL = re.compile(r"(([a-zA-Z0-9_\-.+]{1,64})@((\[[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.)|(([a-zA-Z0-9\-]{1,63}\.)"
                    r"{1,8}))([a-zA-Z]{2,4}|[0-9]{1,3})(\]?))(\?subject=\S{0,512})?")
AUTHOR_CHARS = 1024


def _sync_author_detail(self: Any, key: str = "author") -> None:
    """feedparser's own (6.0), with the bounded pattern above."""
    context = self._get_context()
    detail = context.get(f"{key}s", [feedparser.FeedParserDict()])[-1]
    if detail:
        name, email = detail.get("name"), detail.get("email")
        if name and email:
            context[key] = f"{name} ({email})"
        elif name:
            context[key] = name
        elif email:
            context[key] = email
        return
    author, email = context.get(key), None
    if not author:
        return
    found = _EMAIL.search(author[:AUTHOR_CHARS])
    if found:
        email = found.group(0)
        author = author.replace(email, "").replace("()", "").replace("<>", "").replace("&lt;&gt;", "").strip()
        if author and author[0] == "(":
            author = author[1:]
        if author and author[-1] == ")":
            author = author[:-1]
        author = author.strip()
    if author or email:
        context.setdefault(f"{key}_detail", detail)
    if author:
        detail["name"] = author
    if email:
        detail["email"] = email


feedparser.mixin._FeedParserMixin._sync_author_detail = _sync_author_detail  # type: ignore[method-assign]
