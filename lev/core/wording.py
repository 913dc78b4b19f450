"""Validation errors in words (issue 51): a schema error as `said` (the field or parameter named, what it must be,
never the value sent) and Connexion's own parameter messages reworded (`in_words`)."""

from __future__ import annotations

import re
from typing import Any

from jsonschema.exceptions import ValidationError

WHEN_HELP = "an RFC 3339 date (2026-03-01) or date-time (2026-03-01T09:30:00Z)"
PATTERN_SAYS: dict[str, str] = {}  # the contract's patterns in words (lev.core.contract fills it)
_TYPE_WORDS = {"string": "text (a JSON string)", "integer": "a whole number", "number": "a number",
               "boolean": "true or false", "array": "a list (a JSON array)", "object": "an object", "null": "null"}
_FORMAT_WORDS = {"email": "an email address", "uuid": "an id (a UUID such as 3fa85f64-5717-4562-b3fc-2c963f66afa6)",
                 "date-time": f"an RFC 3339 date-time ({WHEN_HELP})", "date": "a date (2026-03-01)",
                 "uri": "a URL", "ipv4": "an IPv4 address", "ipv6": "an IPv6 address"}


_WORD_FIXES = {"url": "URL", "urls": "URLs", "id": "ID", "ids": "IDs", "mime": "MIME type", "kb": "knowledge base",
               "uri": "URI", "html": "HTML", "opml": "OPML", "sec": "seconds", "ms": "milliseconds"}


def _path(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def field_label(path: Any, parameter: str | None = None) -> str:
    """A field as a message names it: `Password`, `New password (new_password)`, `Folder ids (folder_ids[2])`,
    `The limit parameter`, `The request body`."""
    if parameter:
        return f"The {parameter} parameter"
    keys = [p for p in path if not isinstance(p, int)]
    if not keys:
        return "The request body" if not path else f"Item {_path(path)} of the request body"
    key = str(keys[-1])
    words = " ".join(_WORD_FIXES.get(w) or w for w in key.split("_") if w)
    dotted = _path(path)
    label = words[:1].upper() + words[1:]
    return label if dotted == key and " " not in words else f"{label} ({dotted})"


def said(error: ValidationError, parameter: str | None = None) -> str:
    """A schema error in words: the field named, what it must be, and never its value (a password, a secret, a
    megabyte of text are not sent back); sizes and the accepted choices are said instead (issue 51)."""
    rule, val, inst, path = error.validator, error.validator_value, error.instance, list(error.path)
    n = len(inst) if isinstance(inst, (str, list, dict)) else None
    says: str
    if rule == "required" and isinstance(inst, dict):
        missing = next((k for k in val if k not in inst), val[0] if val else "")
        return f"{field_label([*path, missing], parameter)} is required."
    if rule == "additionalProperties" and isinstance(inst, dict):
        known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        extra = sorted(str(k)[:60] for k in inst if k not in known)
        takes = f" (it takes: {', '.join(sorted(known))})" if known else ""
        where = "" if not path else f" in {_path(path)}"
        return (f"Unknown field{'s' if len(extra) > 1 else ''}{where}: {', '.join(extra[:5])}"
                f"{' …' if len(extra) > 5 else ''}; this operation does not take {'them' if len(extra) > 1 else 'it'}"
                f"{takes}.")
    if rule == "minLength":
        says = "must not be empty" if val == 1 else f"must be at least {val} characters long"
    elif rule == "maxLength":
        says = f"must be at most {val} characters long (it has {n})"
    elif rule == "pattern":
        says = PATTERN_SAYS.get(val, f"does not have the form this field takes (the pattern {val})")
        if n is not None and n > 80:
            says += f" (it has {n} characters)"
    elif rule == "enum":
        says = f"must be one of: {', '.join(str(v) for v in val)}"
    elif rule == "const":
        says = f"must be {val!r}"
    elif rule == "type":
        kinds = val if isinstance(val, list) else [val]
        says = "must be " + " or ".join((_TYPE_WORDS.get(k) or str(k)) for k in kinds)
    elif rule == "format":
        says = f"must be {_FORMAT_WORDS.get(val, f'in the {val} format')}"
    elif rule in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        says = {"minimum": "must be at least", "exclusiveMinimum": "must be more than", "maximum": "must be at most",
                "exclusiveMaximum": "must be less than"}[rule] + f" {val}"
    elif rule == "minItems":
        says = "must not be empty (give at least one)" if val == 1 else f"must have at least {val} items"
    elif rule == "maxItems":
        says = f"must have at most {val} items (it has {n})"
    elif rule == "uniqueItems":
        says = "must not repeat a value"
    elif rule == "minProperties":
        says = "must not be empty" if val == 1 else f"must have at least {val} fields"
    elif rule == "maxProperties":
        says = f"must have at most {val} fields (it has {n})"
    elif rule in ("oneOf", "anyOf"):
        says = "does not have any of the forms this field takes"
    else:
        says = f"is not valid here ({rule})"
    return f"{field_label(path, parameter)} {says}."


_CONNEXION_SAYS = (  # Connexion's own parameter messages (names only, never values), said as the contract's are
    (re.compile(r"Wrong type, expected '(\w+)' for \w+ parameter '([^']+)'"),
     lambda m: f"The {m[2]} parameter must be {_TYPE_WORDS.get(m[1], m[1])}."),
    (re.compile(r"Extra (\w+) parameter\(s\) (.+) not in spec"),
     lambda m: f"Unknown {m[1]} parameter{'s' if ',' in m[2] else ''}: {m[2][:200]}; this operation does not take "
               f"{'them' if ',' in m[2] else 'it'}."),
    (re.compile(r"Missing (\w+) parameter '([^']+)'"), lambda m: f"The {m[2]} parameter is required."),
    (re.compile(r"Request body must not be empty"), lambda m: "The request needs a JSON body."),
)


def in_words(detail: str) -> str:
    """Connexion's validation messages said in words (ours already are: lev.core.contract.said)."""
    for pattern, words in _CONNEXION_SAYS:
        m = pattern.fullmatch(detail.strip())
        if m:
            return words(m)
    return detail
