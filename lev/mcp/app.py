"""Lev's MCP App view (the MCP Apps extension, `io.modelcontextprotocol/ui`, 2026-01-26): the one UI resource,
`ui://lev/results.html`, listed by `resources/list` and served by `resources/read` as `text/html;profile=mcp-app`;
the tools that show it name it in `_meta.ui.resourceUri` (mcp_tools.json). The server declares the extension where
the client does. The HTML is one self-contained file (web/mcp/results.html) with the service's base URL written in.
"""

from __future__ import annotations

import html
from functools import lru_cache
from typing import Any

from lev.core.packagedata import packaged

EXTENSION_ID = "io.modelcontextprotocol/ui"
RESOURCE_URI = "ui://lev/results.html"
MIME_TYPE = "text/html;profile=mcp-app"
# Hosts render the view in a sandbox; it asks for no origin (no connect, resource or frame domains) and a border.
UI_META: dict[str, Any] = {"ui": {"csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": []},
                                  "prefersBorder": True}}
_RESOURCE = {"uri": RESOURCE_URI, "name": "lev-results", "title": "Lev results",
             "description": "Search results and an item's text from Lev's knowledge base, shown in the conversation.",
             "mimeType": MIME_TYPE, "_meta": UI_META}


def negotiated(capabilities: Any) -> bool:
    """Whether a client's capabilities declare the MCP Apps extension with the app MIME type (or without a list)."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    ui = extensions.get(EXTENSION_ID) if isinstance(extensions, dict) else None
    if not isinstance(ui, dict):
        return False
    types = ui.get("mimeTypes")
    return types is None or (isinstance(types, list) and MIME_TYPE in types)


def server_capabilities(base: dict[str, Any], client_capabilities: Any) -> dict[str, Any]:
    """The server's capabilities for a client: resources always (the view can be read by any client), and the
    extension when the client declared it."""
    out = {**base, "resources": {"listChanged": False}}
    if negotiated(client_capabilities):
        out["extensions"] = {EXTENSION_ID: {}}
    return out


def resources() -> list[dict[str, Any]]:
    return [dict(_RESOURCE)]


@lru_cache(maxsize=1)
def _template() -> str:
    return packaged("web", "mcp", "results.html").read_text(encoding="utf-8")


def read(uri: str, base_url: str) -> dict[str, Any] | None:
    """The resource's contents for `resources/read`, or None for a URI Lev does not serve."""
    if uri != RESOURCE_URI:
        return None
    text = _template().replace("__LEV_BASE_URL__", html.escape(base_url.rstrip("/"), quote=True))
    return {"contents": [{"uri": RESOURCE_URI, "mimeType": MIME_TYPE, "text": text, "_meta": UI_META}]}
