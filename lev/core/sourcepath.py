"""A file's path as Lev keeps it (a ZIP's member, a file `lev sync` sends): `Vault/Projects/plan.md`, the folders it
is in, then its name; the Lev folder its folders make (`Vault/Projects`). Plain rules, importing nothing: a ZIP's
directory is read in a child process that should start quickly."""

from __future__ import annotations

import re

MAX_CHARS = 1024
MAX_DEPTH = 100  # folders above the file
MAX_FOLDER_NAME = 200  # FolderCreate.name
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SPACE = r"\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"  # white space that is no control
# The rule of `problem` but the length, as openapi.yaml's `source_path` states it (ECMA-262, linear: a part's
# leading spaces, its first other character, the rest): parts of no control character and no `/`, none empty,
# blank, `.` or `..`, at most 101 of them.
_PART = rf"(?!\.\.?(?:/|$))[{_SPACE}]*[^\x00-\x20\x7f/{_SPACE[4:]}][^\x00-\x1f\x7f/]*"
PATTERN = rf"^{_PART}(?:/{_PART}){{0,{MAX_DEPTH}}}$"


def problem(value: str) -> str | None:
    """Why `value` is no source path (too long, a control character, an empty, `.` or `..` part, too deep), or
    None when it is one."""
    if len(value) > MAX_CHARS:
        return f"is limited to {MAX_CHARS} characters"
    if _CONTROL.search(value):
        return "must not hold control characters"
    parts = value.split("/")
    if any(p in ("", ".", "..") or not p.strip() for p in parts):
        return ("is a relative path of names separated by `/` (no empty, `.` or `..` part, no leading or trailing "
                "`/`)")
    if len(parts) > MAX_DEPTH + 1:
        return f"lies deeper than {MAX_DEPTH} folders"
    return None


def folder_of(parts: list[str]) -> str | None:
    """The Lev folder a file's folders make, named by their path (`Vault/Projects`; over 200 characters the start
    gives way: `…/Projects`), or None for a file at the top."""
    if not parts:
        return None
    name = "/".join(" ".join(p.split())[:MAX_FOLDER_NAME] or "Untitled folder" for p in parts)
    return name if len(name) <= MAX_FOLDER_NAME else "…" + name[-(MAX_FOLDER_NAME - 1):]
