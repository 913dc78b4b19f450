"""Loading `openapi.yaml`, the REST contract, and the one shim that lets Connexion 3.3 use it.

Connexion 3.3 checks documents against the OpenAPI 3.0 meta-schema and refuses `openapi: 3.1.x`
(connexion#1396). We validate with openapi-spec-validator (which knows 3.1) and tell Connexion's
`OpenAPISpecification` to skip its own 3.0 check. Schemas are written so that both readings agree.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import reprlib
from functools import lru_cache
from itertools import islice
from typing import Any

import yaml
from connexion.datastructures import MediaTypeDict
from connexion.exceptions import BadRequestProblem
from connexion.resolver import Resolution, Resolver
from connexion.security import ApiKeySecurityHandler
from connexion.spec import OpenAPISpecification
from connexion.utils import is_null, is_nullable
from connexion.validators import (
    VALIDATOR_MAP,
    JSONRequestBodyValidator,
    MultiPartFormDataValidator,
    ParameterValidator,
)
from inflection import underscore
from jsonschema import Draft4Validator, Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match
from starlette.formparsers import MultiPartException
from starlette.requests import cookie_parser
from starlette.types import Scope

from lev.core import jsonguard
from lev.core.errors import (
    ApiError,
    file_too_large,
    invalid_body,
    invalid_id,
    method_not_allowed,
    unsupported_media_type,
)
from lev.core.mimes import ALLOWED_MIMES, not_accepted
from lev.core.packagedata import packaged
from lev.core.wording import PATTERN_SAYS, WHEN_HELP, said

SPEC_PATH = packaged("openapi.yaml")
MCP_TOOLS_PATH = packaged("mcp_tools.json")


@lru_cache(maxsize=1)
def load_spec() -> dict[str, Any]:
    """The parsed OpenAPI 3.1 document (callers must not mutate it). Parsed by libyaml: the pure-Python parser and the
    meta-schema check took most of a restart's seconds (issue 51); the check runs in the tests (`check_spec`)."""
    return yaml.load(SPEC_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


def check_spec() -> None:
    """Raise when openapi.yaml is not a valid OpenAPI 3.1 document (the tests call it; the package ships it checked)."""
    from openapi_spec_validator import validate

    validate(yaml.safe_load(SPEC_PATH.read_text()))


@lru_cache(maxsize=1)
def spec_json() -> bytes:
    """The document pre-serialised for GET /api/v1/openapi.json."""
    return json.dumps(load_spec(), indent=None, separators=(",", ":")).encode()


UPLOAD_PUT = "/api/v1/uploads/put/{path}"


def connexion_spec() -> dict[str, Any]:
    """A private copy for Connexion, whose own (3.0-only) meta-schema check is disabled. The upload PUT's body is
    documented as `application/octet-stream` (the one type a generated client can send) and may carry the MIME type
    its URL was signed for, which the handler checks: Connexion is told it consumes every allowlisted type too."""
    OpenAPISpecification._validate_spec = classmethod(lambda cls, spec: None)  # type: ignore[method-assign,assignment]
    spec = copy.deepcopy(load_spec())
    body = spec["paths"][UPLOAD_PUT]["put"]["requestBody"]["content"]
    body.update({mime: body["application/octet-stream"] for mime in sorted(ALLOWED_MIMES)})
    return spec


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


def literal_route(path: str) -> bool:
    """Whether `path` is a documented route without parameters (`/api/v1/items/bulk-delete`)."""
    return any(op["path"] == path for op in operations().values())


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


@lru_cache(maxsize=256)
def ecma_pattern(pattern: str) -> re.Pattern[str]:
    """A JSON Schema `pattern` read as ECMA-262 reads it, as clients and fuzzers do: `$` outside a class is the
    end of the string (Python's `$` also matches before a final newline, so `^x$` took "x\\n")."""
    out, in_class, escaped = [], False, False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "[":
            in_class = True
        elif ch == "]":
            in_class = False
        elif ch == "$" and not in_class:
            ch = r"\Z"
        out.append(ch)
    return re.compile("".join(out))


_WS = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NON_BLANK = rf"^[{_WS}]*[^\x00{_WS}][^\x00]*$"  # linear: its parts never overlap
NO_NUL = r"^[^\x00]*$"
EMAIL = rf"^[^@{_WS}]+@[^@{_WS}]+$"
# An invitee's address: a dot in the domain, no white space or control character (lev.sharing checks with it).
_NOT_ADDRESS = r"@\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
INVITE_EMAIL = rf"^[^{_NOT_ADDRESS}]+@[^{_NOT_ADDRESS}]+\.[^{_NOT_ADDRESS}.]+$"
# An http(s) URL with a host: no white space, control character or %<>"{}|\^` in the authority.
HTTP_URL = r'^[Hh][Tt][Tt][Pp][Ss]?://([^\x00-\x20\x7f/?#@]*@)?[^\x00-\x20\x7f/?#@<>"{}|\\^`%]+([/?#][^\x00-\x1f\x7f]*)?$'
# A search filter's forms as the contract's schemas give them (openapi.yaml, mcp_tools.json: tests compare them;
# `lev.library.filters` checks with them): a calendar date or date-time (RFC 3339, the offset optional), and a host
# name. What matches is accepted, nothing else.
_YEAR = r"(000[1-9]|00[1-9][0-9]|0[1-9][0-9][0-9]|[1-9][0-9]{3})"
_MONTH_DAY = r"((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
_LEAP_DAY = r"([0-9][0-9](0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29"
_TIME = (r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,9})?)?"
         r"([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?")
WHEN_PATTERN = rf"^({_YEAR}-{_MONTH_DAY}|{_LEAP_DAY})([Tt ]{_TIME})?$"
_LABEL = r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
SITE_PATTERN = rf"^{_LABEL}(\.{_LABEL})*\.?$"
_PATTERN_SAYS = {
    WHEN_PATTERN: f"is not {WHEN_HELP}",
    SITE_PATTERN: "is not a host name (example.org: letters, digits, hyphens and dots; no scheme, port or path)",
    HTTP_URL: "must be an http or https URL with a host (no white space or control characters, and none of "
              "%<>\"{}|\\^` in the host)",
    NON_BLANK: "needs a character that is not white space, and no NUL",
    NO_NUL: "must not contain NUL characters",
    EMAIL: "is not an email address (one @, no white space)",
    INVITE_EMAIL: "is not an email address such as name@example.com (one @, a dot in the domain, no white space)",
}
PATTERN_SAYS.update(_PATTERN_SAYS)


MAX_ERRORS = 20  # a body's schema errors looked at (the first ones): a million wrong items are not all listed
MAX_MESSAGE = 300  # characters of a validator's message quoted back
_EXCERPT = reprlib.Repr()
_EXCERPT.maxlevel, _EXCERPT.maxlist, _EXCERPT.maxdict, _EXCERPT.maxstring = 2, 4, 4, 60
_EXCERPT.maxlong, _EXCERPT.maxother = 40, 60


def shown(value: str) -> str:
    """A value as an error message quotes it: at most 60 characters of it (a 1 MB text is not sent back)."""
    return repr(value) if len(value) <= 80 else f"{value[:60]!r}… ({len(value)} characters)"


def excerpt(value: Any) -> str:
    """A short quote of any JSON value: a long string cut (`shown`), a list or object with its first items."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, (list, dict)) and len(value) > 4:
        return f"{_EXCERPT.repr(value)} ({len(value)} {'items' if isinstance(value, list) else 'members'})"
    return _EXCERPT.repr(value)


def first_errors(validator: Any, instance: Any) -> list[ValidationError]:
    """The first schema errors of `instance` (at most MAX_ERRORS): validation stops there."""
    return list(islice(validator.iter_errors(instance), MAX_ERRORS))


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Any:
    if validator.is_type(instance, "string") and not ecma_pattern(pattern).search(instance):
        says = _PATTERN_SAYS.get(pattern, f"does not match {pattern!r}")
        yield ValidationError(f"{shown(instance)} {says}")


ContractValidator = validators.extend(Draft202012Validator, {"pattern": _pattern})
"""JSON Schema 2020-12 with formats asserted and patterns read as ECMA-262: bodies and MCP tool arguments."""
_ParameterSchemaValidator = validators.extend(Draft4Validator, {"pattern": _pattern})
_compiled: dict[tuple[int, int], tuple[Any, Any]] = {}


def compiled(schema: dict[str, Any], draft4: bool = False) -> Any:
    """The validator of an operation's schema (the contract's documents are loaded once and never change), made
    on its first use and kept: a parameter's Draft 4 one (`draft4`) or a body's 2020-12 one."""
    key = (id(schema), draft4)
    found = _compiled.get(key)
    if found is None or found[0] is not schema:
        if len(_compiled) > 4096:  # never more than the document's schemas; bounded all the same
            _compiled.clear()
        made = (_ParameterSchemaValidator(schema, format_checker=Draft4Validator.FORMAT_CHECKER) if draft4
                else ContractValidator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER))
        found = _compiled[key] = (schema, made)  # the schema kept with it: its id is never reused meanwhile
    return found[1]


class ContractParameterValidator(ParameterValidator):
    """A path id that breaks its schema (canonical UUID) answers 400 invalid_id, the error table's code; patterns
    are read as ECMA-262 (`ecma_pattern`)."""

    @staticmethod
    def validate_parameter(parameter_type: str, value: Any, param: dict[str, Any],
                           param_name: str | None = None) -> str | None:
        if value is None or (is_nullable(param) and is_null(value)):
            result: str | None = ParameterValidator.validate_parameter(parameter_type, value, param, param_name)
            return f"The {param.get('name', param_name)} parameter is required." if result else None
        try:
            compiled(param.get("schema", param), draft4=True).validate(value)
        except ValidationError as exception:
            return said(exception, str(param_name or param.get("name", parameter_type)))
        return None

    def validate_path_parameter(self, param: dict[str, Any], request: Any) -> str | None:
        error: str | None = super().validate_path_parameter(param, request)
        if error and literal_route(request.url.path):  # GET /items/bulk-delete is not GET /items/{id}
            raise method_not_allowed()
        if error and param.get("schema", {}).get("format") == "uuid":
            raise invalid_id(param["name"])
        return error


def _mapped_error(error: ValidationError) -> ApiError | None:
    """Schema violations the error table gives their own code or fields: a MIME type outside the allowlist (415);
    an allowed type sent to the other finalize endpoint stays 400; a declared upload size over the cap is 413
    file_too_large with the cap as `maxBytes`, as the interface spec's table has it (`lev.ingest.media.check_signing`
    says the same), and so is a page's `html` past its 5 MiB (`lev.ingest.request` counts the bytes)."""

    field = error.path[-1] if error.path else None
    if field == "size" and error.validator == "maximum" and isinstance(error.validator_value, int):
        return file_too_large(f"size: uploads are limited to {error.validator_value} bytes (50 MB).",
                              error.validator_value)
    if field == "html" and error.validator == "maxLength" and isinstance(error.validator_value, int):
        return file_too_large(f"A page's HTML is limited to {error.validator_value} bytes (5 MiB) of UTF-8; this one "
                              "has more.", error.validator_value)
    if field == "mime" and error.validator == "enum" and isinstance(error.instance, str):
        if error.instance not in ALLOWED_MIMES:
            return unsupported_media_type(not_accepted(error.instance))
        wanted = "finalize" if error.instance.startswith(("audio/", "video/")) else "finalize-document"
        return invalid_body(f"{error.instance} uploads are finalized with POST /api/v1/uploads/{wanted}.")
    return None


def _branch_errors(error: ValidationError, body: Any) -> ValidationError:
    """For a `oneOf` with a discriminator (ingest's `kind`), the errors of the branch the body names."""
    disc = error.schema.get("discriminator") if isinstance(error.schema, dict) else None
    if error.validator != "oneOf" or not disc or not isinstance(body, dict):
        return error
    prop = disc["propertyName"]
    value = body.get(prop)
    # Connexion hands the validator the schema with its $refs resolved: find the branch by its enum of `prop`
    index = next((i for i, branch in enumerate(error.validator_value)
                  if value in branch.get("properties", {}).get(prop, {}).get("enum", [])), None)
    if prop not in body:
        return ValidationError(f"{prop} is required", validator="required", validator_value=[prop], instance=body)
    if index is None:
        kinds = list(disc.get("mapping", {}))
        return ValidationError(f"{prop} must be one of {', '.join(kinds)}", path=[prop], validator="enum",
                               validator_value=kinds, instance=value)
    chosen = [e for e in error.context or [] if e.relative_schema_path and e.relative_schema_path[0] == index]
    return best_match(chosen) if chosen else error


class ContractJSONBodyValidator(JSONRequestBodyValidator):
    """JSON bodies checked with JSON Schema 2020-12 (as openapi.yaml is written; `500.0` is an integer there),
    with formats asserted, instead of Connexion's Draft 4."""

    @property
    def _validator(self) -> Any:
        return compiled(self._schema)

    def _validate(self, body: Any) -> dict[str, Any] | None:
        if not self._nullable and body is None:
            raise BadRequestProblem(detail="Request body must not be empty")
        errors = first_errors(self._validator, body)
        if not errors:
            return None
        mapped = [_mapped_error(e) for e in errors]
        if all(m is not None for m in mapped):
            raise mapped[0]  # type: ignore[misc]
        error = best_match(_branch_errors(e, body) for e, m in zip(errors, mapped, strict=True) if m is None)
        raise _mapped_error(error) or BadRequestProblem(detail=said(error))


class GuardedJSONBody(ContractJSONBodyValidator):
    """The contract's JSON body validator with our parser: hostile JSON is a 400, never a crash (lev.core.jsonguard).
    A large body is parsed and validated in a worker thread, off the event loop."""

    checked = False

    async def wrap_receive(self, receive: Any, *, scope: Scope) -> tuple[Any, Scope]:
        if self._schema.get("format") == "binary":  # an upload's bytes sent as a JSON type (a .json file): raw
            return receive, scope
        return await super().wrap_receive(receive, scope=scope)

    async def _parse(self, stream: Any, scope: Scope) -> Any:
        raw = b"".join([message async for message in stream])
        if not raw:
            return None
        if len(raw) <= jsonguard.OFF_LOOP_BYTES:
            return self._parse_and_check(raw)
        return await asyncio.to_thread(self._parse_and_check, raw)

    def _parse_and_check(self, raw: bytes) -> Any:
        try:
            body = jsonguard.loads(raw)
        except jsonguard.BadJson as exc:
            raise BadRequestProblem(detail=str(exc)) from None
        if body is not None or not self._nullable:
            super()._validate(body)
        self.checked = True
        return body

    def _validate(self, body: Any) -> dict[str, Any] | None:
        return None if self.checked else super()._validate(body)


class GuardedMultipartBody(MultiPartFormDataValidator):
    """multipart/form-data whose parts the parser refuses (no `name`, a broken boundary) is a 400, never a crash."""
    async def _parse(self, stream: Any, scope: Scope) -> Any:
        try:
            return await super()._parse(stream, scope)
        except MultiPartException as exc:
            raise BadRequestProblem(detail=f"The multipart/form-data body cannot be read: {exc.message}") from None


def validator_map() -> dict[str, Any]:
    """Connexion's validators with the contract's parameter and body rules and Lev's guarded parsers."""
    bodies = MediaTypeDict({**VALIDATOR_MAP["body"], "*/*json": GuardedJSONBody,
                            "multipart/form-data": GuardedMultipartBody})
    return {**VALIDATOR_MAP, "parameter": ContractParameterValidator, "body": bodies}


class BrowserCookieApiKey(ApiKeySecurityHandler):
    """Reads the session cookie as browsers and Starlette do. Connexion's own reader (`http.cookies.SimpleCookie`)
    raises on a Cookie header holding any cookie it finds malformed (another app's on the same host, say): a 500
    where the request should simply be read without that cookie."""

    @staticmethod
    def get_cookie_value(cookies: Any, name: str) -> str | None:
        return cookie_parser(cookies or "").get(name)


def security_map() -> dict[str, Any]:
    """Connexion's security handlers with the browser's cookie reading."""
    return {"apiKey": BrowserCookieApiKey}
