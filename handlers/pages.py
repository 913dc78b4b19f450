"""The web app's pages (server-rendered with Jinja2)."""

from __future__ import annotations

from typing import Any


def add_routes(app: Any) -> None:
    """Register the pages and the static files on the Connexion app."""
