"""The error catalogue: every code in openapi.yaml's Error enum is asserted by some named test, and the codes the
code base can raise are exactly the documented ones."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import httpx

from lev.core import errors
from lev.core.contract import load_spec
from tests.api.test_rest_foundation import err
from tests.stack import ROOT

DOCUMENTED = set(load_spec()["components"]["schemas"]["Error"]["properties"]["error"]["enum"])
SOURCE_DIRS = ("lev",)  # store/, handlers/, tasks/ live in lev/
# Raised only by operator commands (none at the moment: sign-up raises email_taken over HTTP too).
CLI_ONLY: set[str] = set()

_CONSTRUCTED = re.compile(r'ApiError\(\s*"([a-z_]+)"')


def _py_files(*dirs: str) -> list[Path]:
    return [p for d in dirs for p in (ROOT / d).rglob("*.py") if ".venv" not in p.parts]


def constructors() -> dict[str, str]:
    """Named constructor in lev/core/errors.py -> the code it builds."""
    out = {}
    for name, fn in inspect.getmembers(errors, inspect.isfunction):
        if fn.__module__ == errors.__name__:
            codes = _CONSTRUCTED.findall(inspect.getsource(fn))
            if len(codes) == 1:
                out[name] = codes[0]
    return out


def emitted_codes() -> dict[str, set[str]]:
    """code -> files that raise it: a call of its named constructor, or `ApiError("code", ...)` itself."""
    made_by = constructors()
    found: dict[str, set[str]] = {}
    for path in _py_files(*SOURCE_DIRS):
        text = path.read_text()
        where = str(path.relative_to(ROOT))
        for name, code in made_by.items():
            if re.search(rf"(?<!def )\b{name}\(", text):
                found.setdefault(code, set()).add(where)
        if path.name != "errors.py":
            for code in _CONSTRUCTED.findall(text):
                found.setdefault(code, set()).add(where)
    return found


def test_the_error_table_is_the_documented_catalogue() -> None:
    """Every documented code has its one row in lev/core/errors.py's table, and the table holds nothing else."""
    assert set(errors.TABLE) == DOCUMENTED | CLI_ONLY


def asserting_tests(code: str) -> list[str]:
    """Test files that mention the code as a string literal next to a status or an error assertion."""
    quoted = re.compile(rf'["\']{re.escape(code)}["\']')
    hits = []
    for path in _py_files("tests", "contract_tests"):
        if not path.name.startswith("test_") or path.name == Path(__file__).name:
            continue
        if quoted.search(path.read_text()):
            hits.append(str(path.relative_to(ROOT)))
    hits += [f"{Path(__file__).name}::{name}" for name, codes in DIRECT_TESTS.items() if code in codes]
    return hits


def test_every_emitted_code_is_documented_and_every_documented_code_is_emitted() -> None:
    emitted = emitted_codes()
    undocumented = {c: sorted(f) for c, f in emitted.items() if c not in DOCUMENTED | CLI_ONLY}
    assert not undocumented, f"codes raised but missing from openapi.yaml's Error enum: {undocumented}"
    never_raised = DOCUMENTED - set(emitted)
    assert not never_raised, f"documented codes nothing raises: {sorted(never_raised)}"


def test_every_documented_code_is_asserted_by_a_named_test() -> None:
    missing = sorted(code for code in DOCUMENTED if not asserting_tests(code))
    assert not missing, f"no test asserts these documented error codes: {missing}"


# --- direct tests for codes no other test file produced --------------------------------------------------------

DIRECT_TESTS = {
    "test_method_not_allowed": {"method_not_allowed"},
    "test_forbidden_origin_on_mcp": {"forbidden_origin"},
}


def test_method_not_allowed(server, api, user) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    err(c.patch("/api/v1/folders", json={}), 405, "method_not_allowed")
    err(c.put("/api/v1/items/bulk-delete", json={}), 405, "method_not_allowed")


def test_forbidden_origin_on_mcp(server, user) -> None:  # type: ignore[no-untyped-def]
    r = httpx.post(f"{server.url}/api/mcp", content=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', headers={
        "Authorization": f"Bearer {user.token()}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "Origin": "https://evil.example"})
    assert r.status_code == 403, r.text
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["data"]["error"] == "forbidden_origin", body
