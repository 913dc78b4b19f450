"""Operations endpoints outside the API: GET /healthz (alive), GET /readyz (ready to serve), GET /metrics."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lev import runtime
from lev.core.errors import unavailable
from lev.handlers import deps
from lev.ops import health, metrics


async def healthz(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(_request: Request) -> Response:
    try:
        d = deps()
    except RuntimeError:  # the runtime is not open (starting or stopping)
        raise unavailable("Not ready: the server is starting or stopping.", failed=["runtime"]) from None
    return JSONResponse(await health.readiness(d.db, d.redis, d.objects))


async def metrics_text(_request: Request) -> Response:
    try:
        queue: dict[str, float] | None = await health.queue_snapshot(deps().redis, runtime.QUEUE)
    except Exception:  # Redis down (or the runtime closed): the process metrics are still worth serving
        queue = None
    return Response(metrics.render(queue), media_type=metrics.CONTENT_TYPE)
