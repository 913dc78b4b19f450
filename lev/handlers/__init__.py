"""REST and MCP handlers: thin functions named by operation (parse -> policy -> store -> shape)."""

from __future__ import annotations

from typing import Any

from lev import runtime
from lev.auth.policy import Principal
from lev.plumbing.deps import Deps


def principal(token_info: dict[str, Any]) -> Principal:
    """The authenticated token Connexion's bearer hook put into token_info."""
    return token_info["principal"]


def deps() -> Deps:
    """What the process hands to the operations: settings, database, queue, object store, embedder, transcriber."""
    return runtime.deps()
