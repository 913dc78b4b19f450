"""GET /api/v1/openapi.json: the pre-serialised contract (Connexion's own spec route is off)."""

from __future__ import annotations

from connexion.lifecycle import ConnexionResponse

from lev.openapi import spec_json


async def get_open_api_document() -> ConnexionResponse:
    return ConnexionResponse(status_code=200, body=spec_json(), content_type="application/json")
