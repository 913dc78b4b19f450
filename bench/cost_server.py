"""The server `bench/cost.py` measures: `lev serve` of the checkout first on PYTHONPATH (this commit's or an old
commit's `git archive`), with the floor beside it in the same process: a bare ASGI endpoint under `/floor/` that
runs the same domain and store calls as the REST operation (the same SQL, on the same engine, pool and event
loop) and answers the same JSON, without the layers around them (Connexion's routing and validation,
authentication, rate limit, metrics, log line, activity entry, LevMiddleware).

    python bench/cost_server.py --port 8123 --no-workers-inline     # arguments as `lev serve` takes them

Floor routes (the bench's bearer token is authenticated once, on the first floor request, and kept):
`GET /floor/healthz`, `GET /floor/folders`, `GET /floor/items?per_page=N`, `GET /floor/search?q=...&mode=M`,
`PATCH /floor/folders/{id}` with `{"name": ...}`.
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import date, datetime
from typing import Any
from urllib.parse import parse_qs

from lev import runtime
from lev import serve as lev_serve

FLOOR = "/floor/"
_principal: Any = None


def _default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


async def _caller(scope: dict[str, Any]) -> Any:
    global _principal
    if _principal is None:
        from lev.auth.policy import authenticate

        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        async with runtime.deps().db.read_session() as s:
            _principal = await authenticate(s, auth.removeprefix("Bearer "))
    return _principal


async def _body(receive: Any) -> bytes:
    parts, more = [], True
    while more:
        message = await receive()
        parts.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(parts)


async def _answer(scope: dict[str, Any], receive: Any) -> Any:
    from lev.library import reads as library
    from lev.store import folders as folder_store
    from lev.store import items as item_store

    path, method = scope["path"][len(FLOOR):], scope["method"]
    query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
    if path == "healthz":
        return {"status": "ok"}
    p = await _caller(scope)
    d = runtime.deps()
    if path == "folders":
        async with d.db.read_session() as s:
            return {"folders": await folder_store.list_visible(s, p.scope)}
    if path == "items":
        per_page = int(query.get("per_page", 50))
        async with d.db.read_session() as s:
            found, total = await item_store.list_items(s, p.scope, folder_id=None, archived=None, in_kb=None,
                                                       page=1, per_page=per_page, url=None)
        return {"items": found, "total": total, "page": 1, "per_page": per_page}
    if path == "search":
        return await library.search(d, p, query=query["q"], mode=query.get("mode", "hybrid"),
                                    limit=int(query.get("limit", 10)))
    if path.startswith("folders/") and method == "PATCH":
        name = json.loads(await _body(receive))["name"]
        async with d.db.transaction() as s:
            return await library.rename_folder(s, p.scope, uuid.UUID(path.split("/", 1)[1]), name)
    raise LookupError(path)


def with_floor(app: Any) -> Any:
    async def floored(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(FLOOR):
            await app(scope, receive, send)
            return
        try:
            body, status = json.dumps(await _answer(scope, receive), default=_default).encode(), 200
        except LookupError:
            body, status = b'{"error":"not_found"}', 404
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return floored


def main(argv: list[str]) -> None:
    create_app = lev_serve.create_app
    lev_serve.create_app = lambda settings=None: with_floor(create_app(settings))  # type: ignore[assignment]
    from lev.cli import main as lev_main

    lev_main(["serve", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
