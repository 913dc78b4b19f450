"""Style sheets made self-contained for an archived copy: the URLs a sheet names (`url(...)`, `@import`) found and
rewritten, fonts left out (the archive's policy loads none), nothing that could end a `<style>` element kept."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urljoin, urlsplit

# Each pattern is linear in the sheet (issue 47): an unquoted URL holds no `(` (CSS makes it a bad URL), a font face
# no `{`, and an unclosed comment runs to the sheet's end, as CSS reads it; each start then fails at once instead
# of scanning the rest of the sheet again (`url(` repeated 10,000 times took 28 s).
_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^()'"\s]*))\s*\)""", re.IGNORECASE)
_IMPORT = re.compile(r"""@import\s+(?:url\(\s*)?(?:"([^"]*)"|'([^']*)'|([^)'"\s;]+))\s*\)?[^;]*;?""",
                     re.IGNORECASE)
_FONT_FACE = re.compile(r"@font-face\s*\{[^{}]*\}", re.IGNORECASE)
_CLOSE = re.compile(r"</(?=\s*style)", re.IGNORECASE)
_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.DOTALL)


def absolute(base: str, ref: str) -> str | None:
    """`ref` resolved against `base` when it is an http(s) URL (fragment dropped), else None."""
    ref = ref.strip()
    if not ref or ref.startswith("#"):
        return None
    try:
        url = urljoin(base, ref)
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return url.split("#", 1)[0]


def _value(m: re.Match[str]) -> str:
    return next((g for g in m.groups() if g is not None), "")


def imports(css: str, base: str) -> list[str]:
    """The sheets `css` imports, as absolute URLs, in order."""
    found = (absolute(base, _value(m)) for m in _IMPORT.finditer(_COMMENT.sub("", css)))
    return list(dict.fromkeys(u for u in found if u))


def references(css: str, base: str) -> list[str]:
    """The images `css` names (`url(...)` outside `@font-face` and `@import`), as absolute URLs, in order."""
    body = _IMPORT.sub("", _FONT_FACE.sub("", _COMMENT.sub("", css)))
    found = (absolute(base, _value(m)) for m in _URL.finditer(body))
    return list(dict.fromkeys(u for u in found if u))


def rewrite(css: str, base: str, sheet: Callable[[str], str | None], image: Callable[[str], str | None]) -> str:
    """`css` with each `@import` replaced by the imported sheet (`sheet(url)`: its rewritten text, or None to drop
    it), each image `url(...)` by `image(url)` (a `data:` URL, or None: `none`), fonts dropped; safe inside
    `<style>`."""
    css = _COMMENT.sub("", css)

    def imported(m: re.Match[str]) -> str:
        url = absolute(base, _value(m))
        text = sheet(url) if url else None
        return f"\n{text}\n" if text else ""

    def url_of(m: re.Match[str]) -> str:
        raw = _value(m).strip()
        if raw.lower().startswith("data:image/") and '"' not in raw:
            return f'url("{raw}")'
        url = absolute(base, raw)
        data = image(url) if url else None
        return f'url("{data}")' if data else "none"

    css = _FONT_FACE.sub("", _IMPORT.sub(imported, css))
    return _CLOSE.sub("<\\\\/", _URL.sub(url_of, css))
