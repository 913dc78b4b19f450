"""Per-request facts shared between the outer middleware, the auth hook and handlers.

The outer middleware sets a fresh `RequestInfo` in a ContextVar; inner code fills it in
(principal, route, result count, search query) and the middleware reads it when logging.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestInfo:
    request_id: str
    surface: str = "rest"
    method: str = ""
    principal: Any = None  # the lev.auth.policy.Principal once the request is authenticated
    result_count: int | None = None
    query: str | None = None
    ip: str | None = None
    user_id: uuid.UUID | None = None  # for requests without a principal (sign-up, sign-in)
    unlogged: bool = False  # the entry is not written to the user's log (e.g. the request that clears it)
    headers: dict[str, str] = field(default_factory=dict)
    base_url: str = ""


_current: ContextVar[RequestInfo | None] = ContextVar("lev_request", default=None)


def current() -> RequestInfo | None:
    return _current.get()


def set_current(info: RequestInfo) -> None:
    _current.set(info)


def note_results(count: int, query: str | None = None) -> None:
    """Record the result count (and search query) of this request for the activity log."""
    info = _current.get()
    if info is not None:
        info.result_count = count
        if query is not None:
            info.query = query


def note_search(principal: Any, method: str) -> None:
    """A search made on a web page: logged for its user like the API's (`note_results` adds its query and count)."""
    info = _current.get()
    if info is not None:
        info.principal, info.method = principal, method


def note_user(user_id: uuid.UUID) -> None:
    """Attribute this request to a user that has no principal yet (sign-up, sign-in)."""
    info = _current.get()
    if info is not None:
        info.user_id = user_id


def forget_user() -> None:
    """Keep this request out of the user's activity log."""
    info = _current.get()
    if info is not None:
        info.unlogged = True


def served_base_url(scheme: str, server: tuple[str, int | None] | None) -> str:
    """`scheme://host:port` of the socket a request arrived on (ASGI `server`), IPv6 hosts bracketed."""
    host, port = server if server else ("127.0.0.1", None)
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}" if port else f"{scheme}://{host}"


def base_url() -> str:
    """The service's public base URL as the outer middleware decided it for this request (`LEV_BASE_URL` when set,
    else the address the request was served on). Outside a request, code is handed the settings instead."""
    info = _current.get()
    return info.base_url if info is not None and info.base_url else "http://127.0.0.1:8080"
