"""Operations endpoints outside the API: GET /healthz (alive), GET /readyz (ready to serve), GET /metrics."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lev.ops import health, metrics


async def healthz(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(_request: Request) -> Response:
    return JSONResponse(await health.readiness())


async def metrics_text(_request: Request) -> Response:
    try:
        queue: dict[str, float] | None = await health.queue_snapshot()
    except Exception:  # Redis down: the process metrics are still worth serving
        queue = None
    return Response(metrics.render(queue), media_type=metrics.CONTENT_TYPE)
