"""GET /api/v1/openapi.json: the pre-serialised contract (Connexion's own spec route is off), and its
rendering at /api/v1/docs."""

from __future__ import annotations

from connexion.lifecycle import ConnexionResponse
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from lev.core.contract import spec_json
from lev.core.packagedata import packaged

REDOC_JS = packaged("web", "static", "redoc", "redoc.standalone.js")


async def get_open_api_document() -> ConnexionResponse:
    return ConnexionResponse(status_code=200, body=spec_json(), content_type="application/json")


_DOCS_HTML = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Lev REST API</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><redoc spec-url="/api/v1/openapi.json"></redoc>
<script src="/api/v1/docs/redoc.standalone.js"></script></body></html>
"""


async def api_docs(_request: Request) -> Response:
    """GET /api/v1/docs: the contract rendered by the vendored Redoc (no CDN)."""
    return Response(_DOCS_HTML, media_type="text/html; charset=utf-8",
                    headers={"Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                             "img-src 'self' data:; worker-src 'self' blob:; font-src 'self' data:; "
                             "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"})


async def redoc_js(_request: Request) -> Response:
    return FileResponse(REDOC_JS, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})
