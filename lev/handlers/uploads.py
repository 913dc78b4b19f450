"""The upload handshake: POST /uploads/signed-url, PUT /uploads/put/{path}, POST /uploads/finalize(-document)."""

from __future__ import annotations

from typing import Any

from lev.handlers import deps, principal
from lev.ingest import uploads
from lev.library import reads as library


async def create_upload_url(body: dict[str, Any], token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    p = principal(token_info)
    result = await uploads.signed_url(deps(), p, mime=body["mime"], size=int(body["size"]), filename=body["filename"])
    return result, 200


async def put_upload_object(path: str, expires: str | None = None, size: str | None = None, mime: str | None = None,
                     sig: str | None = None) -> tuple[dict[str, Any], int]:
    """The local store's signed PUT. No bearer: the HMAC signature in the query is the credential.

    The body is not declared as a handler argument, so Connexion never reads it; it is streamed
    from the request to disk with a hard cap.
    """
    from connexion import request

    result = await uploads.receive_upload(
        deps(), path, expires=expires, size=size, mime=mime, sig=sig, content_type=request.headers.get("content-type"),
        content_length=request.headers.get("content-length"), chunks=request.stream(),
    )
    return result, 200


async def finalize_media_upload(body: dict[str, Any], token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    stored = await uploads.finalize(deps(), principal(token_info), {**body, "size": int(body["size"])}, "finalize")
    return stored.answer(), 200


async def finalize_document_upload(body: dict[str, Any], token_info: dict[str, Any]) -> tuple[dict[str, Any], int]:
    stored = await uploads.finalize(deps(), principal(token_info), {**body, "size": int(body["size"])},
                                    "finalize-document")
    return stored.answer(), 200


async def list_source_files(token_info: dict[str, Any], prefix: str = "", after: str | None = None,
                            limit: int = 1000) -> dict[str, Any]:
    return await library.source_files(deps(), principal(token_info), prefix, after, limit)
