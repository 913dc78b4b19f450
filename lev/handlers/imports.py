"""Imports and export: POST /imports (a ZIP of a folder, a bookmark, Pocket, Raindrop or Lev export file),
GET /imports and /imports/{id} (progress), GET /export (the library as JSON Lines)."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import UploadFile
from starlette.responses import StreamingResponse

from lev.auth.policy import parse_uuid
from lev.core import clock, context
from lev.core.errors import invalid_body
from lev.handlers import deps, principal
from lev.imports import service as imports
from lev.library import export as library_export


async def create_import(token_info: dict[str, Any], file: Any = None,
                        body: dict[str, Any] | None = None) -> tuple[dict[str, Any], int]:
    p = principal(token_info)
    if not isinstance(file, UploadFile):
        raise invalid_body("Send the file as the multipart/form-data field `file`.")
    folder = (body or {}).get("folder")
    if folder is not None and not isinstance(folder, str):
        raise invalid_body("`folder` is a text field of the form.")
    result = await imports.start_upload(deps(), p, file.file, file.filename, folder)
    context.note_results(result["total"])
    return result, 202


async def get_import(id_: str, token_info: dict[str, Any]) -> dict[str, Any]:
    p = principal(token_info)
    result = await imports.status(deps(), p, parse_uuid(id_))
    context.note_results(1)
    return result


async def list_imports(token_info: dict[str, Any]) -> dict[str, Any]:
    found = await imports.recent(deps(), principal(token_info))
    context.note_results(len(found))
    return {"imports": found}


async def export_library(token_info: dict[str, Any]) -> StreamingResponse:
    p = principal(token_info)
    library_export.check(p)
    name = f"lev-export-{clock.now():%Y%m%d-%H%M%S}.jsonl"
    return StreamingResponse(library_export.lines(deps().db, p), media_type="application/x-ndjson",
                             headers={"Content-Disposition": f'attachment; filename="{name}"',
                                      "Cache-Control": "no-store"})
