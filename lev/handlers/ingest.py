"""POST /api/v1/ingest: a URL, a text snippet, or a page captured in the user's browser."""

from __future__ import annotations

from typing import Any

from lev.auth.policy import parse_uuid_field
from lev.handlers import deps, principal
from lev.ingest.request import IngestRequest
from lev.ingest.service import ingest as run_ingest


async def ingest(body: dict[str, Any], token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    req = IngestRequest(
        body["kind"], url=body.get("url"), text=body.get("text"), title=body.get("title"),
        html=body.get("html"), source_url=body.get("source_url"),
        in_kb=body.get("in_kb", True), auto_transform=body.get("auto_transform", True),
        folder_id=parse_uuid_field(body.get("folder_id"), "folder_id"), tags=tuple(body.get("tags") or ()),
    )
    return (await run_ingest(deps(), principal(token_info), req)).answer(), 200
