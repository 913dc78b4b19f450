"""The one error table of the service, its named constructors, and every shape an error takes on the wire.

Every documented error code has one row in `TABLE` (HTTP status, JSON-RPC code, whether an MCP tool returns it
as a tool result). Code raises `ApiError` through the constructors below; this module alone turns an error into
a REST body, a JSON-RPC error object or an MCP tool error result, and maps foreign exceptions onto the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from connexion.exceptions import BadRequestProblem, OAuthProblem, ProblemException, Unauthorized
from jsonrpcserver.exceptions import JsonRpcError
from starlette.exceptions import HTTPException

from lev.core import outages
from lev.core.wording import in_words

log = structlog.stdlib.get_logger("lev")

JSONRPC_INVALID_REQUEST = -32600
JSONRPC_METHOD_NOT_FOUND = -32601
JSONRPC_INVALID_PARAMS = -32602
JSONRPC_INTERNAL = -32603
JSONRPC_PARSE_ERROR = -32700
JSONRPC_CUSTOM = -32605
JSONRPC_RESOURCE_NOT_FOUND = -32002  # MCP: resources/read of a URI the server does not serve
# MCP 2026-07-28's own codes (the -32020..-32099 sub-range the MCP specification reserves for itself).
JSONRPC_HEADER_MISMATCH = -32020
JSONRPC_UNSUPPORTED_PROTOCOL_VERSION = -32022


@dataclass(frozen=True)
class ErrorKind:
    """One row of the table: the HTTP status, the JSON-RPC code on MCP, and whether a tool returns it as a result."""
    status: int
    rpc: int = JSONRPC_CUSTOM
    tool_result: bool = False


# Every documented code (openapi.yaml's Error enum; `email_taken` is the CLI's) and how it travels.
TABLE: dict[str, ErrorKind] = {
    "invalid_body": ErrorKind(400, JSONRPC_INVALID_PARAMS),
    "invalid_id": ErrorKind(400, JSONRPC_INVALID_PARAMS),
    "ingest_failed": ErrorKind(400, tool_result=True),
    "not_a_feed": ErrorKind(400),
    "address_refused": ErrorKind(400),
    "transcription_unavailable": ErrorKind(400, tool_result=True),
    "mail_unavailable": ErrorKind(400, tool_result=True),
    "missing_bearer_token": ErrorKind(401, JSONRPC_INVALID_REQUEST),
    "invalid_token": ErrorKind(401, JSONRPC_INVALID_REQUEST),
    "invalid_credentials": ErrorKind(401),
    "not_signed_in": ErrorKind(401),
    "quota_exceeded": ErrorKind(402),
    "payment_required": ErrorKind(402),
    "capability_denied": ErrorKind(403),
    "forbidden_scope": ErrorKind(403),
    "invalid_signature": ErrorKind(403),
    "forbidden_origin": ErrorKind(403, JSONRPC_INVALID_REQUEST),
    "csrf_failed": ErrorKind(403),
    "signup_closed": ErrorKind(403),
    "not_found": ErrorKind(404, tool_result=True),
    "folder_not_found": ErrorKind(404, tool_result=True),
    "method_not_allowed": ErrorKind(405),
    "method_not_found": ErrorKind(404, JSONRPC_METHOD_NOT_FOUND),
    "header_mismatch": ErrorKind(400, JSONRPC_HEADER_MISMATCH),
    "unsupported_protocol_version": ErrorKind(400, JSONRPC_UNSUPPORTED_PROTOCOL_VERSION),
    "name_taken": ErrorKind(409, tool_result=True),
    "limit_reached": ErrorKind(409),
    "email_taken": ErrorKind(409),
    # State conflicts (issue 52): well formed, but the resource's present state refuses it (raised where they arise).
    **{code: ErrorKind(409, tool_result=True) for code in (
        "already_invited", "already_member", "owner_fixed", "endpoint_disabled", "feed_paused", "item_not_ready",
        "item_changed", "words_not_found", "address_changed")},
    "file_too_large": ErrorKind(413, tool_result=True),
    "unsupported_media_type": ErrorKind(415, tool_result=True),
    "size_mismatch": ErrorKind(422),
    "mime_mismatch": ErrorKind(422),
    "object_missing": ErrorKind(422),
    "extraction_failed": ErrorKind(422, tool_result=True),
    "rate_limited": ErrorKind(429),
    "internal_error": ErrorKind(500, JSONRPC_INTERNAL),
    "unavailable": ErrorKind(503, JSONRPC_INTERNAL),
}

# Errors an agent gets back as a tool result with isError: true rather than a JSON-RPC error.
MCP_TOOL_ERRORS = frozenset(code for code, kind in TABLE.items() if kind.tool_result)


class ApiError(Exception):
    """An error with a code from `TABLE`, a message and extra body fields; the status comes from the table."""
    def __init__(self, code: str, message: str | None = None, *, headers: dict[str, str] | None = None,
                 **extra: Any) -> None:
        super().__init__(message or code)
        self.entry = TABLE[code]
        self.code = code
        self.message = message
        self.extra = extra
        self.headers: dict[str, str] = dict(headers or {})

    @property
    def status(self) -> int:
        return self.entry.status

    def __reduce__(self) -> tuple[Any, ...]:  # raised in a child process (lev.plumbing.offload), rebuilt here
        return _rebuild, (self.code, self.message, self.headers, self.extra)


def _rebuild(code: str, message: str | None, headers: dict[str, str], extra: dict[str, Any]) -> ApiError:
    return ApiError(code, message, headers=headers, **extra)


# ------------------------------------------------------------------------------------------------ shapes


def rest_body(err: ApiError, request_id: str | None = None) -> dict[str, Any]:
    """The REST body `{error, message?, ...extra}`; a 5xx also names the request id."""
    out: dict[str, Any] = {"error": err.code}
    if err.message is not None:
        out["message"] = err.message
    out.update(err.extra)
    if err.status >= 500 and request_id is not None:
        out["request_id"] = request_id
    return out


def rest_headers(err: ApiError) -> dict[str, str]:
    """The response headers an error carries (Retry-After, WWW-Authenticate on 401, ...)."""
    headers = dict(err.headers)
    if err.code in ("missing_bearer_token", "invalid_token"):
        headers["WWW-Authenticate"] = 'Bearer realm="lev"'
    return headers


def jsonrpc_error(err: ApiError, request_id: str | None = None, *, code: int | None = None) -> JsonRpcError:
    """The JSON-RPC error a tool call or method answers with (raise it inside jsonrpcserver); `code` overrides the
    table's where MCP names its own (a resource not found)."""
    return JsonRpcError(code=code or err.entry.rpc, message=err.message or err.code, data=rest_body(err, request_id))


def jsonrpc_response(err: ApiError, req_id: str | int | None = None, *, code: int | None = None,
                     request_id: str | None = None) -> dict[str, Any]:
    """A whole JSON-RPC error response, for errors met outside jsonrpcserver's dispatch."""
    return {"jsonrpc": "2.0", "id": req_id, "error": {"code": code or err.entry.rpc, "message": err.message or err.code,
                                                      "data": rest_body(err, request_id)}}


def transport_error(err: ApiError) -> dict[str, Any]:
    """The JSON-RPC response for an error met before dispatch (origin, version, authentication)."""
    return jsonrpc_response(err, code=JSONRPC_INVALID_REQUEST)


def tool_error(err: ApiError) -> dict[str, Any]:
    """The MCP tool result with isError: true and a sentence ending in `(error: CODE)`."""
    text = err.message or err.code
    return {"content": [{"type": "text", "text": f"{text} (error: {err.code})"}], "isError": True}


def to_api_error(exc: Exception) -> ApiError:
    """The one mapping from any exception to the contract's errors."""
    if isinstance(exc, ApiError):
        return exc
    down = infrastructure_error(exc)
    if down is not None:
        log.warning("dependency unavailable", error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return down
    if isinstance(exc, (OAuthProblem, Unauthorized)):
        return missing_bearer_token()
    if isinstance(exc, BadRequestProblem):
        return invalid_body(in_words(str(exc.detail or "The request failed validation.")))
    if isinstance(exc, UnicodeDecodeError):  # Connexion decodes JSON bodies before validating them
        return invalid_body("The request body is not UTF-8 encoded JSON.")
    if isinstance(exc, ProblemException) and (exc.status or 500) < 500:
        fallback = "Send application/json." if exc.status == 415 else exc.title
        return _by_status(exc.status or 500, str(exc.detail or fallback))
    if isinstance(exc, HTTPException) and exc.status_code < 500:
        return _by_status(exc.status_code, str(exc.detail))
    log.error("unhandled error", exc_info=exc)
    return internal_error()


def _by_status(status: int, detail: str) -> ApiError:
    if status == 404:
        return not_found("No such route.")
    if status == 405:
        return method_not_allowed()
    if status == 415:
        return unsupported_media_type(detail)
    return invalid_body(detail)


# ------------------------------------------------------------------------------------------------ constructors


def invalid_body(message: str, **extra: Any) -> ApiError:
    return ApiError("invalid_body", message, **extra)


def invalid_id(what: str) -> ApiError:
    """400 for a path id that is not a canonical UUID; `what` names it (the parameter, or the value quoted)."""
    return ApiError("invalid_id", f"{what} is not a UUID in canonical form (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx).")


def ingest_failed(message: str) -> ApiError:
    """The spec's 'descriptive error' for an unreachable or unsupported URL (400)."""
    return ApiError("ingest_failed", message)


def transcription_unavailable() -> ApiError:
    return ApiError("transcription_unavailable",
                    "Transcription is not configured on this server (LEV_TRANSCRIBE_URL is unset), so audio, "
                    "video and YouTube videos without captions cannot be ingested.")


def missing_bearer_token() -> ApiError:
    return ApiError("missing_bearer_token", "Send Authorization: Bearer <token>.")


def invalid_token(message: str = "The token is unknown, revoked or expired.") -> ApiError:
    return ApiError("invalid_token", message)


def invalid_credentials() -> ApiError:
    return ApiError("invalid_credentials", "The email or password is wrong.")


def not_signed_in() -> ApiError:
    return ApiError("not_signed_in", "Sign in first: this needs a browser session.")


def csrf_failed() -> ApiError:
    return ApiError("csrf_failed", "Send the session's csrf_token in the X-CSRF-Token header.")


def signup_closed() -> ApiError:
    return ApiError("signup_closed", "Sign-up is closed on this server; ask its operator for an account.")


def quota_exceeded(message: str, **extra: Any) -> ApiError:
    return ApiError("quota_exceeded", message, **extra)


def payment_required(message: str, **extra: Any) -> ApiError:
    return ApiError("payment_required", message, **extra)


def capability_denied(message: str, **extra: Any) -> ApiError:
    return ApiError("capability_denied", message, **extra)


def forbidden_scope(message: str, **extra: Any) -> ApiError:
    return ApiError("forbidden_scope", message, **extra)


def invalid_signature(message: str) -> ApiError:
    return ApiError("invalid_signature", message)


def forbidden_origin(origin: str) -> ApiError:
    return ApiError("forbidden_origin", f"Origin {origin} is not allowed.")


def not_found(message: str = "The resource does not exist or is outside this token's scope.") -> ApiError:
    return ApiError("not_found", message)


T = TypeVar("T")


def found(value: T | None) -> T:
    """`value`, or 404 not_found when there is none (what lies outside the caller's scope is not there either)."""
    if value is None:
        raise not_found()
    return value


def folder_not_found(message: str, missing: list[str]) -> ApiError:
    return ApiError("folder_not_found", message, missing=missing)


def method_not_allowed() -> ApiError:
    return ApiError("method_not_allowed", "Method not allowed on this route.")


def method_not_found(method: str, served: list[str]) -> ApiError:
    """MCP: a JSON-RPC method the request's protocol revision does not serve (HTTP 404 on 2026-07-28)."""
    return ApiError("method_not_found", f"Method not found: {method[:100]}. This revision serves {', '.join(served)}.")


def header_mismatch(message: str) -> ApiError:
    """MCP 2026-07-28: a routing header (MCP-Protocol-Version, Mcp-Method, Mcp-Name) is missing, repeated or
    disagrees with the body."""
    return ApiError("header_mismatch", message)


def unsupported_protocol_version(requested: str, supported: list[str]) -> ApiError:
    """MCP: a protocol revision Lev does not speak; `supported` and `requested` are the 2026-07-28 error data."""
    return ApiError("unsupported_protocol_version",
                    f"Unsupported protocol version {requested[:100]!r}; supported: {', '.join(supported)}.",
                    supported=supported, requested=requested[:100])


def address_refused(message: str) -> ApiError:
    """A feed's or a webhook endpoint's address the SSRF guard will not reach (private, loopback, link-local, a
    cloud metadata service); the message names the setting that allows it, where one does."""
    return ApiError("address_refused", message)


def not_a_feed(message: str) -> ApiError:
    """400: the URL to follow is not a feed, and its page names none (or it cannot be fetched or read)."""
    return ApiError("not_a_feed", message)


def limit_reached(message: str, **extra: Any) -> ApiError:
    """409: a per-user count (feeds followed, webhook endpoints) is at its cap (`cap`, `used`)."""
    return ApiError("limit_reached", message, **extra)


def name_taken(message: str) -> ApiError:
    return ApiError("name_taken", message)


def file_too_large(message: str, max_bytes: int, **extra: Any) -> ApiError:
    return ApiError("file_too_large", message, maxBytes=max_bytes, **extra)


def unsupported_media_type(message: str) -> ApiError:
    return ApiError("unsupported_media_type", message)


def size_mismatch(message: str) -> ApiError:
    return ApiError("size_mismatch", message)


def object_missing() -> ApiError:
    return ApiError("object_missing",
                    "No uploaded object at this path for this user: upload the bytes to the signed_url first "
                    "(paths expire 24 hours after signing).")


def extraction_failed(message: str) -> ApiError:
    return ApiError("extraction_failed", message)


def rate_limited(message: str, headers: dict[str, str], **extra: Any) -> ApiError:
    return ApiError("rate_limited", message, headers=headers, **extra)


def internal_error() -> ApiError:
    return ApiError("internal_error", "Unexpected server error; report the request_id if it persists.")


UNAVAILABLE_RETRY_SEC = 5


def unavailable(message: str, **extra: Any) -> ApiError:
    """503: a part the service depends on (database, Redis, object store) cannot be reached right now."""
    return ApiError("unavailable", message, headers={"Retry-After": str(UNAVAILABLE_RETRY_SEC)},
                    retry_after_sec=UNAVAILABLE_RETRY_SEC, **extra)


query_error = outages.query_error


def infrastructure_error(exc: BaseException) -> ApiError | None:
    """503 `unavailable` when `exc` says the database, Redis or the object store cannot be reached
    (`lev.core.outages`); None for anything else, which stays a bug (500)."""
    part = outages.unreachable_part(exc)
    return None if part is None else unavailable(outages.MESSAGES[part], part=part)
