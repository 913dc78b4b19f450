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
from connexion.resolver import Resolution, Resolver
from connexion.spec import OpenAPISpecification
from inflection import underscore
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


def connexion_spec() -> dict[str, Any]:
    """A private copy for Connexion, whose own (3.0-only) meta-schema check is disabled."""
    OpenAPISpecification._validate_spec = classmethod(lambda cls, spec: None)  # type: ignore[method-assign,assignment]
    return copy.deepcopy(load_spec())


def handler_name(operation: dict[str, Any]) -> str:
    """The handler of an operation: `x-openapi-router-controller` plus the snake_case operationId
    (`handlers.folders` + `listFolders` -> `handlers.folders.list_folders`)."""
    return f"{operation['x-openapi-router-controller']}.{underscore(operation['operationId'])}"


class OperationResolver(Resolver):
    """Connexion's resolver for our clean operationIds; the routed operation keeps the spec's operationId."""

    def resolve(self, operation: Any) -> Resolution:
        op_id = operation.operation_id
        name = f"{operation.router_controller}.{underscore(op_id)}"
        return Resolution(self.resolve_function_from_operation_id(name), op_id)


def operations() -> dict[str, dict[str, Any]]:
    """operationId -> {method, path, operation} for every operation in the document."""
    out: dict[str, dict[str, Any]] = {}
    for path, item in load_spec()["paths"].items():
        for method, op in item.items():
            if method in {"get", "post", "put", "delete", "patch"}:
                out[op["operationId"]] = {"method": method.upper(), "path": path, "operation": op}
    return out


@lru_cache(maxsize=1)
def mcp_tools() -> dict[str, Any]:
    """The MCP tool declarations from `mcp_tools.json`."""
    return json.loads(MCP_TOOLS_PATH.read_text())
