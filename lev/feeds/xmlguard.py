"""The rule defusedxml applies, for the XML Lev reads (OPML files, RSS and Atom feeds): a document that declares an
entity (internal or external, parsed or not) or refers to an external one is refused, wherever the declaration is
and whatever the document's encoding (expat reads the document as it is: UTF-8, UTF-16, a declared charset)."""

from __future__ import annotations

from typing import Any
from xml.parsers import expat


class EntitiesForbidden(ValueError):
    """The document declares an entity (or refers to an external one), at `line`."""

    def __init__(self, line: int) -> None:
        super().__init__(f"line {line}: the document declares XML entities")
        self.line = line


def forbid_entities(parser: Any) -> None:
    """Make `parser` (an expat parser) raise EntitiesForbidden at the first entity declaration or external
    reference."""
    def refuse(*_args: Any) -> None:
        raise EntitiesForbidden(parser.CurrentLineNumber)

    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse


def declares_entities(data: bytes) -> int | None:
    """The line of the first entity declaration in the XML document `data`, or None (none, or not XML: the reader
    that follows says what is wrong)."""
    parser = expat.ParserCreate()
    forbid_entities(parser)
    try:
        parser.Parse(data, True)
    except EntitiesForbidden as exc:
        return exc.line
    except (expat.ExpatError, ValueError):
        return None
    return None
