"""Lev's MCP Server Card (SEP-2127, the experimental `v1` card: identity, the streamable-HTTP endpoint, the
revisions it speaks), served at `/.well-known/mcp/server-card.json` and `/api/mcp/server-card`, and the same facts
as the MCP Registry's `server.json` (schema 2025-12-11) describes them for any self-hosted Lev (`registry_entry`;
the checkout's `server.json` is that, written out). Pure: no I/O."""

from __future__ import annotations

import re
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

from lev.core.packagedata import VERSION
from lev.mcp import revision

CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
REGISTRY_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
PATHS = ("/.well-known/mcp/server-card.json", "/api/mcp/server-card")
MCP_PATH = "/api/mcp"
# The registry's namespace is the publisher's (a GitHub account or a domain they prove): set it before publishing.
REGISTRY_NAME = "io.github.your-account/lev"
DESCRIPTION = "Your knowledge base for AI agents: search, read and save pages, notes, PDFs and recordings."
_TOKEN = {"description": "A lev_ token (account page, or `lev token create`); clients that sign in by OAuth need none.",
          "isRequired": True, "isSecret": True}
AUTHORIZATION = {"name": "Authorization", "description": "Bearer token for the MCP endpoint.", "isRequired": False,
                 "isSecret": True, "value": "Bearer {token}", "variables": {"token": _TOKEN}}
_NOT_NAME = re.compile(r"[^a-zA-Z0-9.-]")


def _remote(url: str) -> dict[str, Any]:
    return {"type": "streamable-http", "url": url, "headers": [AUTHORIZATION],
            "supportedProtocolVersions": list(revision.SUPPORTED)}


def instance_name(base_url: str) -> str:
    """This server's name in reverse-DNS form: its host name's labels reversed, then `/lev` (lev.example.org ->
    org.example.lev/lev; an IP address as it is); characters a name cannot hold (an IPv6 address's colons) become
    hyphens."""
    host = urlsplit(base_url).hostname or "localhost"
    try:
        ip_address(host)
    except ValueError:
        host = ".".join(reversed(host.split(".")))
    return _NOT_NAME.sub("-", host) + "/lev"


def server_card(base_url: str) -> dict[str, Any]:
    """The card of the Lev serving at `base_url`."""
    base = base_url.rstrip("/")
    return {"$schema": CARD_SCHEMA, "name": instance_name(base), "version": VERSION,
            "title": revision.SERVER_INFO["title"], "description": DESCRIPTION, "websiteUrl": f"{base}/",
            "remotes": [_remote(f"{base}{MCP_PATH}")]}


def registry_entry() -> dict[str, Any]:
    """Lev for the MCP Registry: a remote at a host its operator names (`{host}`), as every Lev is self-hosted."""
    host = {"description": "Your Lev server's host name (and port), as its LEV_BASE_URL has it.", "isRequired": True}
    remote = {"type": "streamable-http", "url": f"https://{{host}}{MCP_PATH}", "headers": [AUTHORIZATION],
              "variables": {"host": host}}
    return {"$schema": REGISTRY_SCHEMA, "name": REGISTRY_NAME, "version": VERSION,
            "title": revision.SERVER_INFO["title"], "description": DESCRIPTION, "remotes": [remote]}
