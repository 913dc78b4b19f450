"""The security headers of Lev's pages: a Content-Security-Policy that lets a page load and call only Lev itself (and
the object store's origin, where uploads go and media is read), never be framed (`frame-ancestors 'none'`), never
post a form elsewhere; `X-Content-Type-Options: nosniff` on every response; `Referrer-Policy: same-origin`.

`LevMiddleware` adds them to every response of the web surface and to every HTML response that does not carry its
own (the consent page names its client's redirect origin in `form-action`; the Redoc page keeps its own policy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit


def content_security_policy(origins: Iterable[str] = (), form_action: Iterable[str] = ()) -> str:
    """The policy: Lev's own scripts, styles, images and fonts; connections and media also to `origins` (an S3 object
    store); forms to Lev and `form_action` (a redirect the form's answer leads to)."""
    extra = " ".join(o for o in origins if o)
    more = (" " + extra) if extra else ""
    forms = " ".join(["'self'", *form_action])
    return ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
            f"connect-src 'self'{more}; media-src 'self'{more}; object-src 'none'; base-uri 'none'; "
            f"form-action {forms}; frame-ancestors 'none'")


# An archived copy of a page (GET /api/v1/items/{id}/archive): an opaque origin that runs no script and loads nothing
# but the `data:` images and styles inlined into it (DESIGN.md section 12).
ARCHIVE_POLICY = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline' data:"
# Stored files a browser shows inline without running anything of Lev's origin: recordings, pictures (not SVG, a
# document that runs script), PDFs (the browser's viewer) and plain text (nosniff keeps it text). Any other file
# (an uploaded .html or .xhtml, XML, an e-mail's attachment) is sent as a download, sandboxed should a browser
# render it all the same.
INLINE_TYPES = frozenset({"application/pdf", "text/plain", "image/png", "image/jpeg", "image/gif", "image/webp",
                          "image/avif", "image/bmp", "image/tiff", "image/heic", "image/heif"})
STORED_FILE_POLICY = "sandbox; default-src 'none'"


def shown_inline(mime: str) -> bool:
    """Whether a stored file of this MIME type is served inline (a player, a picture, a PDF) or as a download."""
    base = mime.split(";")[0].strip().lower()
    return base in INLINE_TYPES or base.startswith(("audio/", "video/"))


def store_origins(object_store: Callable[[], Any]) -> list[str]:
    """The object store's own origin when browsers talk to it directly (S3), else none; none either when the store
    is misconfigured (uploads then fail on their own, with a message)."""
    try:
        origin = object_store().browser_origin()
    except RuntimeError:
        return []
    return [origin] if origin else []


def source_of(url: str) -> str:
    """The CSP source expression that matches `url`: `scheme://host[:port]`, or `scheme:` for a native app's own
    scheme (cursor://..., com.example.app:/...)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https") and parts.netloc:
        return f"{scheme}://{parts.netloc}"
    return f"{scheme}:"


def add_headers(raw: list[tuple[bytes, bytes]], *, page: bool, policy: str) -> list[tuple[bytes, bytes]]:
    """`raw` (ASGI response headers) with nosniff and, for a page, the policy, the referrer policy and DENY framing,
    each unless the response set its own."""
    present = {k.lower() for k, _ in raw}
    wanted: list[tuple[bytes, bytes]] = [(b"x-content-type-options", b"nosniff")]
    if page:
        wanted += [(b"content-security-policy", policy.encode()), (b"referrer-policy", b"same-origin"),
                   (b"x-frame-options", b"DENY")]
    return raw + [(k, v) for k, v in wanted if k not in present]
