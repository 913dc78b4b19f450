"""The codec a declared charset names (a `Content-Type`'s `charset=`), for bytes Lev decodes itself: a text
encoding Python decodes in one pass, else UTF-8. Refused: names Python does not know or that are no text encoding
(`zlib`: a LookupError, answered 500 before), and the codecs written in Python whose decoding is quadratic
(`punycode`: 80,000 bytes took 10-30 s on the event loop; `idna`, built on it)."""

from __future__ import annotations

import codecs

SLOW = frozenset({"punycode", "idna"})


def text_codec(declared: str | None, default: str = "utf-8") -> str:
    """The codec to decode with: the declared charset when it is a known, one-pass text encoding, else `default`."""
    if not declared:
        return default
    try:
        info = codecs.lookup(declared.strip().strip("\"'"))
    except (LookupError, ValueError):
        return default
    if not getattr(info, "_is_text_encoding", True) or info.name in SLOW:
        return default
    return info.name


def decode(body: bytes, declared: str | None) -> str:
    """`body` as text in its declared charset (see `text_codec`), undecodable bytes replaced."""
    return body.decode(text_codec(declared), errors="replace")
