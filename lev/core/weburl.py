"""The one parser of the URLs people and clients send (ingest, capture, share, feeds, webhooks, OAuth client
metadata): a URL is accepted here or refused with the reason in words, never passed on half-checked to fail later
(an unclosed IPv6 bracket, a port that is no number, a scheme without a host)."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from urllib.parse import SplitResult, urlsplit

import httpx

from lev.core.errors import ApiError, invalid_body

HTTP = ("http", "https")
MAX_URL_CHARS = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_BAD_HOST = re.compile(r"[\s<>\"{}|\\^`%/?#@]")


class BadUrl(ValueError):
    """Why a string is not an acceptable URL, in words that complete "url ..." (e.g. "has no host")."""


def parse(value: object, *, schemes: Collection[str] | None = HTTP, need_host: bool = True,
          max_chars: int = MAX_URL_CHARS) -> SplitResult:
    """The parts of `value` (trimmed), or BadUrl: not text, empty, too long, control characters, unparseable
    (brackets, port, host), a scheme outside `schemes` (None: any scheme), or no host when `need_host`. An http(s)
    URL is also one httpx (the guarded client) can request."""
    if not isinstance(value, str):
        raise BadUrl("must be a string")
    url = value.strip()
    if not url:
        raise BadUrl("must not be empty")
    if len(url) > max_chars:
        raise BadUrl(f"is limited to {max_chars} characters")
    if _CONTROL.search(url):
        raise BadUrl("must not contain control characters")
    try:
        parts = urlsplit(url)
        host, _port = parts.hostname, parts.port
    except ValueError:
        raise BadUrl("cannot be parsed as a URL (check its brackets and port)") from None
    scheme = parts.scheme.lower()
    if schemes is not None and scheme not in schemes:
        wanted = "an http or https URL" if tuple(schemes) == HTTP else f"a URL of scheme {', '.join(schemes)}"
        raise BadUrl(f"must be {wanted}" + (f", not {scheme}" if scheme and len(scheme) < 20 else ""))
    if need_host and not host:
        raise BadUrl("has no host")
    if host and _BAD_HOST.search(host):
        raise BadUrl("has a host that is no host name or address")
    if scheme in HTTP:
        try:
            _ = httpx.URL(url).host  # reading the host decodes its IDNA labels: `xn--zz` fails only there
        except Exception:  # httpx's own checks (an invalid host name, IDNA): not a URL it could fetch
            raise BadUrl("cannot be parsed as a URL (check its host)") from None
    return parts


def http_url(value: object, field: str = "url", *, error: Callable[[str], ApiError] = invalid_body,
             max_chars: int = MAX_URL_CHARS) -> str:
    """`value` trimmed when it is an http(s) URL with a host; else 400 (`error`, invalid_body by default) naming
    `field` and the reason."""
    try:
        parse(value, max_chars=max_chars)
    except BadUrl as exc:
        raise error(f"{field} {exc}.") from None
    assert isinstance(value, str)
    return value.strip()


def is_http_url(value: object) -> bool:
    try:
        parse(value)
    except BadUrl:
        return False
    return True
