"""Text made fit for XML 1.0: the characters it forbids (C0 controls but tab, line feed and carriage return; lone
surrogates; U+FFFE and U+FFFF) are removed, so a name or title holding one never makes a document invalid."""

from __future__ import annotations

import re

_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: str) -> str:
    """`value` without the characters XML 1.0 forbids."""
    return _FORBIDDEN.sub("", value)
