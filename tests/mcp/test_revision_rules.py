"""Which MCP revision a request speaks (lev/mcp/revision.py), decided before the dispatch."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from lev.core.errors import ApiError
from lev.mcp import revision


def test_the_header_names_a_revision_lev_speaks() -> None:
    assert revision.requested_version(Headers({})) is None
    assert revision.requested_version(Headers({"mcp-protocol-version": "2025-06-18"})) == "2025-06-18"
    with pytest.raises(ApiError) as err:
        revision.requested_version(Headers({"mcp-protocol-version": "1999-01-01"}))
    assert err.value.code == "unsupported_protocol_version"


def test_meta_and_header_must_agree() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {revision.PROTOCOL_VERSION_KEY: revision.MODERN}}}
    assert revision.is_modern(revision.MODERN, body)
    with pytest.raises(ApiError) as err:
        revision.is_modern(None, body)
    assert err.value.code == "header_mismatch"
    assert not revision.is_modern("2025-11-25", {"jsonrpc": "2.0", "method": "notifications/initialized"})


def test_a_modern_body_is_one_request() -> None:
    assert revision.envelope_problem([{"jsonrpc": "2.0"}]) is not None
    assert revision.envelope_problem({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}) is None
