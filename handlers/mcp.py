"""POST /api/mcp: placeholder until the MCP surface lands."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response


async def endpoint(request: Request) -> Response:
    if request.method != "POST":
        return Response(status_code=405, headers={"Allow": "POST"})
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32601, "message": "not yet"}})
