"""MCP Inspector's CLI (pinned 2.12.0, Node) against the live app with a pasted token: it lists the four tools and
calls one, lists the item template and reads an item. The package is installed once into `.cache/` (about 12 s from
the npm registry; later runs reuse it, and each Inspector run then takes about a second: `npx` itself would spend
some 15 s per run resolving it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from lev.core.contract import mcp_tools
from tests.stack import ROOT, make_item

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
HOME = ROOT / ".cache" / "inspector-2.12.0"


def _inspector() -> Path:
    """The Inspector's executable, installed on first use (into a fresh directory, then moved into place)."""
    exe = HOME / "node_modules" / ".bin" / "mcp-inspector"
    if not exe.exists():
        npm = shutil.which("npm")
        assert npm, "MCP Inspector's test needs Node.js and npm on PATH"
        HOME.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="inspector-", dir=HOME.parent))
        subprocess.run([npm, "install", "--prefix", str(staging), "--no-save", "--no-audit", "--no-fund",
                        "--loglevel=error", INSPECTOR], check=True, timeout=300, capture_output=True)
        try:
            staging.rename(HOME)
        except OSError:  # another run installed it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    return exe


def _run(url: str, token: str, *args: str) -> Any:
    out = subprocess.run([str(_inspector()), "--cli", f"{url}/api/mcp", "--transport", "http",
                          "--header", f"Authorization: Bearer {token}", *args],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_inspector_cli_lists_and_calls_tools_with_a_pasted_token(server, user) -> None:
    token = user.token()
    listed = _run(server.url, token, "--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == [t["name"] for t in mcp_tools()["tools"]]
    called = _run(server.url, token, "--method", "tools/call", "--tool-name", "list_recent", "--tool-arg", "limit=1")
    assert called["isError"] is False and called["structuredContent"] == {"items": []}


def test_inspector_cli_lists_the_item_template_and_reads_an_item(server, user) -> None:  # type: ignore[no-untyped-def]
    token = user.token()
    listed = _run(server.url, token, "--method", "resources/templates/list")
    assert [t["uriTemplate"] for t in listed["resourceTemplates"]] == ["lev://items/{item_id}"]
    item = make_item(user, title="Inspected")
    read = _run(server.url, token, "--method", "resources/read", "--uri", f"lev://items/{item}")
    (content,) = read["contents"]
    assert content["uri"] == f"lev://items/{item}" and content["text"] == "text of Inspected"
    assert content["_meta"]["lev/item"]["title"] == "Inspected"
