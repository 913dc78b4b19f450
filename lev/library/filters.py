"""A search's filters as the surfaces send them (REST query parameters, MCP arguments, the web search box's
operators), checked and turned into `store.filters.Filters`; a bad one is 400 invalid_body naming the parameter
(MCP: -32602)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lev.auth.policy import parse_uuid_field
from lev.core.contract import SITE_PATTERN, WHEN_HELP, WHEN_PATTERN
from lev.core.errors import ApiError, invalid_body
from lev.store.filters import KINDS, Filters
from lev.store.tags import key_of
from lev.tags.names import check_name

_WHEN = re.compile(WHEN_PATTERN)
_SITE = re.compile(SITE_PATTERN)


def _bad(name: str, message: str, **extra: Any) -> ApiError:
    return invalid_body(f"{name} {message}", parameter=name, **extra)


def parse_kinds(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """The kinds asked for (a repeated parameter, an array, or one value; commas also separate), or 400."""
    if values is None:
        return ()
    raw = [values] if isinstance(values, str) else list(values)
    kinds: list[str] = []
    for value in raw:
        if not isinstance(value, str):
            raise _bad("kind", f"must be one or more of: {', '.join(KINDS)}.", allowed=list(KINDS))
        for part in value.split(","):
            kind = part.strip().lower()
            if kind not in KINDS:
                raise _bad("kind", f"must be one or more of: {', '.join(KINDS)} (got {part.strip()[:40]!r}).",
                           allowed=list(KINDS))
            if kind not in kinds:
                kinds.append(kind)
    return tuple(sorted(kinds))


def parse_site(value: str | None) -> str | None:
    """A host name (`SITE_PATTERN`, at most 253 characters), lower case, without a trailing dot; else 400."""
    if value is None:
        return None
    if len(value) > 253 or not _SITE.match(value):
        raise _bad("site", "must be a host name such as example.org (it also matches its subdomains, "
                   "news.example.org).")
    return value.removesuffix("\n").lower().rstrip(".")  # `$` matches before a final newline, as JSON Schema reads it


def parse_when(value: str | None, name: str) -> dt.datetime | None:
    """`after`/`before` as the instant it bounds: a date means its first moment (UTC) for `after`, the first moment
    of the next day for `before` (the day counts); a date-time without an offset is UTC. 400 when it is not an
    RFC 3339 date or date-time (`WHEN_PATTERN`)."""
    if value is None:
        return None
    if not _WHEN.match(value):
        raise _bad(name, f"must be {WHEN_HELP} (got {value[:40]!r}).")
    value = value.removesuffix("\n")  # `$` matches before a final newline, as JSON Schema's patterns read it
    if len(value) == 10:
        day = dt.date.fromisoformat(value)
        start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
        if name != "before":
            return start
        return start + dt.timedelta(days=1) if day < dt.date.max else dt.datetime.max.replace(tzinfo=dt.UTC)
    when = dt.datetime.fromisoformat(value.upper().replace(" ", "T"))
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


MAX_TAGS = 20  # tags one search or list may name


def parse_tags(values: Iterable[str] | str | None, name: str = "tag") -> tuple[str, ...]:
    """The keys of the tags asked for (a repeated parameter, an array, or one value), each a tag name (400
    naming the parameter otherwise), at most 20; sorted, each once."""
    if values is None:
        return ()
    raw = [values] if isinstance(values, str) else list(values)
    if len(raw) > MAX_TAGS:
        raise _bad(name, f"names at most {MAX_TAGS} tags.")
    return tuple(sorted({key_of(check_name(v, name)) for v in raw}))


def parse_filters(*, folder_id: str | None = None, item_id: str | None = None,
                  kind: Iterable[str] | str | None = None, site: str | None = None, after: str | None = None,
                  before: str | None = None, tag: Iterable[str] | str | None = None,
                  tag_name: str = "tag") -> Filters:
    """The filters of one search, each checked; `after` later than `before` is 400 too. `tag_name` is what the
    surface calls the tags (REST `tag`, MCP `tags`)."""
    f = Filters(folder_id=_uuid(folder_id, "folder_id"), item_id=_uuid(item_id, "item_id"), kinds=parse_kinds(kind),
                site=parse_site(site), after=parse_when(after, "after"), before=parse_when(before, "before"),
                tags=parse_tags(tag, tag_name))
    if f.after is not None and f.before is not None and f.after > f.before:
        raise _bad("after", "must not be later than before.")
    return f


def _uuid(value: str | None, name: str) -> Any:
    try:
        return parse_uuid_field(value, name)
    except ApiError as err:
        raise _bad(name, "must be a UUID in canonical form.") from err


@dataclass(frozen=True)
class BoxQuery:
    """What the web app's search box holds: the words to search for and the operators' filters (raw values;
    `folder` is a folder's name)."""

    words: str
    kind: tuple[str, ...] = ()
    site: str | None = None
    after: str | None = None
    before: str | None = None
    folder: str | None = None
    tag: tuple[str, ...] = ()


_OPERATOR = re.compile(r'(?<!\S)(site|kind|after|before|folder|tag):(?:"([^"]*)"|(\S+))', re.IGNORECASE)


def parse_box(query: str) -> BoxQuery:
    """Split `site:`, `kind:`, `after:`, `before:`, `folder:"Name"` and `tag:` out of a search box's text; the rest
    are the words searched for. An operator's value may be quoted; `kind:` may repeat or list kinds with commas,
    `tag:` may repeat (each tag must be there: `tag:work tag:"to read"`)."""
    found: dict[str, Any] = {"kind": [], "tag": []}
    for m in _OPERATOR.finditer(query):
        key, value = m.group(1).lower(), m.group(2) if m.group(2) is not None else m.group(3)
        if key in ("kind", "tag"):
            found[key].append(value)
        else:
            found[key] = value
    words = " ".join(_OPERATOR.sub(" ", query).split())
    return BoxQuery(words, tuple(found.pop("kind")), tag=tuple(found.pop("tag")), **found)
