"""Loading `openapi.yaml`, the REST contract, and the one shim that lets Connexion 3.3 use it.

Connexion 3.3 checks documents against the OpenAPI 3.0 meta-schema and refuses `openapi: 3.1.x`
(connexion#1396). We validate with openapi-spec-validator (which knows 3.1) and tell Connexion's
`OpenAPISpecification` to skip its own 3.0 check. Schemas are written so that both readings agree.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from connexion.spec import OpenAPISpecification
from openapi_spec_validator import validate

ROOT = Path(__file__).resolve().parent.parent
SPEC_PATH = ROOT / "openapi.yaml"
MCP_TOOLS_PATH = ROOT / "mcp_tools.json"


@lru_cache(maxsize=1)
def load_spec() -> dict[str, Any]:
    """The parsed and validated OpenAPI 3.1 document (callers must not mutate it)."""
    spec = yaml.safe_load(SPEC_PATH.read_text())
    validate(spec)
    return spec


@lru_cache(maxsize=1)
def spec_json() -> bytes:
    """The document pre-serialised for GET /api/v1/openapi.json."""
    return json.dumps(load_spec(), indent=None, separators=(",", ":")).encode()


def _base(spec: dict[str, Any], item: dict[str, Any]) -> str:
    """The server URL a path item lives under: its own `servers` (the account API) or the document's."""
    servers = item.get("servers") or spec.get("servers") or [{"url": ""}]
    return str(servers[0]["url"]).rstrip("/")


def api_bases() -> list[str]:
    """The distinct base paths of the document, the document's own first (each becomes one Connexion API)."""
    spec = load_spec()
    bases = [_base(spec, {})]
    for item in spec["paths"].values():
        if _base(spec, item) not in bases:
            bases.append(_base(spec, item))
    return bases


def connexion_spec(base: str | None = None) -> dict[str, Any]:
    """A private copy for Connexion (whose own 3.0-only meta-schema check is disabled), limited to the paths
    served under `base` (default: the document's server)."""
    OpenAPISpecification._validate_spec = classmethod(lambda cls, spec: None)  # type: ignore[method-assign,assignment]
    spec = copy.deepcopy(load_spec())
    base = api_bases()[0] if base is None else base
    spec["paths"] = {p: item for p, item in spec["paths"].items() if _base(spec, item) == base}
    for item in spec["paths"].values():
        item.pop("servers", None)
    return spec


def operations() -> dict[str, dict[str, Any]]:
    """operationId -> {method, path (relative to its server), url (the full path), operation} for every
    operation in the document."""
    spec = load_spec()
    out: dict[str, dict[str, Any]] = {}
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method in {"get", "post", "put", "delete", "patch"}:
                out[op["operationId"]] = {"method": method.upper(), "path": path, "url": _base(spec, item) + path,
                                          "operation": op}
    return out


@lru_cache(maxsize=1)
def mcp_tools() -> dict[str, Any]:
    """The MCP tool declarations from `mcp_tools.json`."""
    return json.loads(MCP_TOOLS_PATH.read_text())
