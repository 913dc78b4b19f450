"""What the consent page says about a client: its name, the site vouching for a metadata document, the host the
answer goes back to (the page's most prominent fact), and whether it names itself after Lev's browser extension
without being one (labelled unverified)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

from lev.oauth.clients import Client


def describe(client: Client, redirect_uri: str) -> dict[str, Any]:
    """What the consent page shows about a client: its name, for a metadata document the site vouching for it, the
    host the answer goes back to, and whether it names itself after Lev's browser extension without being one."""
    host = urlsplit(client.client_id).hostname if client.kind == "cimd" else None
    redirect = urlsplit(redirect_uri)
    return {"name": client.name, "kind": client.kind, "host": host, "uri": client.uri, "client_id": client.client_id,
            "redirect_host": redirect.hostname or redirect.scheme, "redirect_origin": f"{redirect.scheme}://"
            f"{redirect.netloc}", "unverified": impersonates_extension(client.name, redirect_uri)}


# A browser extension's own redirects: Chrome's identity API (an id of 32 letters a-p), an extension page, Firefox's
_EXTENSION_REDIRECT = re.compile(r"(?:https://[a-p]{32}\.chromiumapp\.org|chrome-extension://[a-p]{32}|"
                                 r"moz-extension://[0-9a-f-]{36}|https://[0-9a-f]{40}\.extensions\.allizom\.org)"
                                 r"(?:[/?]|$)")
_EXTENSION_WORDS = frozenset({"extension", "browser", "addon", "add-on", "chrome", "firefox", "plugin"})


def impersonates_extension(name: str, redirect_uri: str) -> bool:
    """Whether a client calls itself Lev's browser extension (the word Lev with extension, browser, add-on, ...
    after Unicode folding) while its redirect is not a browser extension's."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    words = set(re.findall(r"[a-z0-9-]+", re.sub(r"[\u200b-\u200f\u2060\ufeff]", "", folded)))
    return "lev" in words and bool(words & _EXTENSION_WORDS) and not _EXTENSION_REDIRECT.match(redirect_uri)
