"""The one error type of the service and its mapping to REST bodies and JSON-RPC errors.

Handlers, policy and store code raise `ApiError`; only this module turns it into a response.
"""

from __future__ import annotations

from typing import Any

import botocore.exceptions
import psycopg
import redis.exceptions
import sqlalchemy.exc

# REST error code -> JSON-RPC code used on the MCP surface (spec "MCP error mapping" + DESIGN §4).
JSONRPC_INVALID_REQUEST = -32600
JSONRPC_METHOD_NOT_FOUND = -32601
JSONRPC_INVALID_PARAMS = -32602
JSONRPC_INTERNAL = -32603
JSONRPC_PARSE_ERROR = -32700
JSONRPC_CUSTOM = -32605

MCP_CODES: dict[str, int] = {
    "invalid_body": JSONRPC_INVALID_PARAMS,
    "invalid_id": JSONRPC_INVALID_PARAMS,
    "missing_bearer_token": JSONRPC_INVALID_REQUEST,
    "invalid_token": JSONRPC_INVALID_REQUEST,
    "capability_denied": JSONRPC_CUSTOM,
    "forbidden_scope": JSONRPC_CUSTOM,
    "quota_exceeded": JSONRPC_CUSTOM,
    "payment_required": JSONRPC_CUSTOM,
    "rate_limited": JSONRPC_CUSTOM,
    "internal_error": JSONRPC_INTERNAL,
    "unavailable": JSONRPC_INTERNAL,
}

# Errors an agent gets back as a tool result with isError: true rather than a JSON-RPC error.
MCP_TOOL_ERRORS = frozenset(
    {"not_found", "ingest_failed", "folder_not_found", "unsupported_media_type",
     "file_too_large", "extraction_failed", "transcription_unavailable", "name_taken"}
)


class ApiError(Exception):
    """An error with an HTTP status, a machine-readable code, a message and extra body fields."""

    def __init__(self, status: int, code: str, message: str | None = None, **extra: Any) -> None:
        super().__init__(message or code)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra
        self.headers: dict[str, str] = {}

    def body(self) -> dict[str, Any]:
        """The REST body: {error, message?, ...extra}."""
        out: dict[str, Any] = {"error": self.code}
        if self.message is not None:
            out["message"] = self.message
        out.update(self.extra)
        return out

    def jsonrpc_error(self) -> dict[str, Any]:
        """The JSON-RPC error object for the MCP surface."""
        code = MCP_CODES.get(self.code, JSONRPC_CUSTOM)
        return {"code": code, "message": self.message or self.code, "data": self.body()}


def invalid_body(message: str) -> ApiError:
    return ApiError(400, "invalid_body", message)


def not_found() -> ApiError:
    return ApiError(404, "not_found", "The resource does not exist or is outside this token's scope.")


def ingest_failed(message: str) -> ApiError:
    """The spec's 'descriptive error' for an unreachable or unsupported URL (400)."""
    return ApiError(400, "ingest_failed", message)


UNAVAILABLE_RETRY_SEC = 5


def unavailable(message: str, **extra: Any) -> ApiError:
    """503: a part the service depends on (database, Redis, object store) cannot be reached right now."""
    err = ApiError(503, "unavailable", message, retry_after_sec=UNAVAILABLE_RETRY_SEC, **extra)
    err.headers = {"Retry-After": str(UNAVAILABLE_RETRY_SEC)}
    return err


def infrastructure_error(exc: BaseException) -> ApiError | None:
    """503 `unavailable` when `exc` says the database or Redis cannot be reached (down, restarting, pool
    exhausted); None for anything else, which stays a bug (500)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, (psycopg.OperationalError, psycopg.InterfaceError, sqlalchemy.exc.TimeoutError)) or (
                isinstance(cur, sqlalchemy.exc.DBAPIError) and (
                    cur.connection_invalidated or isinstance(cur, (sqlalchemy.exc.OperationalError,
                                                                sqlalchemy.exc.InterfaceError)))):
            return unavailable("The database is unavailable right now; retry shortly.", part="database")
        if isinstance(cur, (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectionClosedError,
                            botocore.exceptions.ConnectTimeoutError, botocore.exceptions.ReadTimeoutError)):
            return unavailable("The object store is unavailable right now; retry shortly.", part="object_store")
        if isinstance(cur, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
            return unavailable("The job queue and limiter store (Redis) is unavailable right now; retry shortly.",
                               part="redis")
        cur = cur.__cause__ or cur.__context__
    return None
