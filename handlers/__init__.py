"""REST and MCP handlers: thin functions named by operation (parse -> policy -> store -> shape)."""

from __future__ import annotations

from typing import Any

from lev.auth.policy import Principal


def principal(token_info: dict[str, Any]) -> Principal:
    """The authenticated token Connexion's bearer hook put into token_info."""
    return token_info["principal"]
