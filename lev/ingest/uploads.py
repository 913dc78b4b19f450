"""The upload handshake: signed URLs, the local store's signed PUT, and finalize.

The signed-URL step records a pending upload (`uploads`); the client PUTs the bytes (to Lev itself for the
local store, to S3 otherwise); finalize checks the stored object (exists, size, magic bytes), reads it
(`acquire.file`) and keeps it like any ingest (`service.keep`). A finalize retried for the same upload answers what
the first one did.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from lev.auth.policy import Principal, require, require_whole_library
from lev.core import clock, context, sourcepath
from lev.core.errors import (
    ApiError,
    file_too_large,
    invalid_body,
    invalid_signature,
    not_found,
    object_missing,
    size_mismatch,
    transcription_unavailable,
    unsupported_media_type,
)
from lev.ingest import acquire
from lev.ingest.acquire import Source
from lev.ingest.media import SNIFF_HEAD, check_signing, finalize_endpoint, media_class, normalize_mime, sniff_matches
from lev.ingest.request import FileAt, Resolved, filing, source_path
from lev.ingest.save import Stored, finalized, kept_file
from lev.ingest.service import keep
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.store import imports as import_store
from lev.store import lifecycle
from lev.store import uploads as upload_store
from lev.store.objects import InvalidObjectPath, LocalObjectStore, SignatureError, SizeExceeded, check_path

log = logs.get_logger("lev.uploads")

SIGNED_URL_TTL_SEC = 3600
UPLOAD_EXPIRY = timedelta(hours=24)


def _no_nul(**fields: Any) -> None:
    """400 for text PostgreSQL cannot store (U+0000)."""
    for name, value in fields.items():
        if isinstance(value, str) and "\x00" in value:
            raise invalid_body(f"{name} must not contain NUL characters.")


async def signed_url(deps: Deps, principal: Principal, *, mime: str, size: int, filename: str) -> dict[str, Any]:
    """Issue a signed PUT URL for one upload and record it as pending."""
    require(principal, "write")
    _no_nul(mime=mime, filename=filename)
    mime = normalize_mime(mime)
    check_signing(mime, size)
    if not filename.strip():
        raise invalid_body("filename must not be blank.")
    path = deps.objects.new_path(str(principal.user_id), filename)
    url = deps.objects.signed_put_url(path, size, mime, expires_in=SIGNED_URL_TTL_SEC, base_url=context.base_url())
    now = clock.now()
    async with deps.db.transaction() as s:
        await upload_store.create_upload(s, path=path, user_id=principal.user_id, mime=mime, size=size,
                                         filename=filename.strip()[:255], created_at=now)
    return {
        "path": path, "signed_url": url, "finalize_endpoint": finalize_endpoint(mime),
        "method": "PUT", "headers": {"Content-Type": mime},
        "expires_at": (now + timedelta(seconds=SIGNED_URL_TTL_SEC)).isoformat(),
    }


async def receive_upload(deps: Deps, path: str, *, expires: str | None, size: str | None, mime: str | None,
                         sig: str | None, content_type: str | None, content_length: str | None,
                         chunks: AsyncIterator[bytes]) -> dict[str, Any]:
    """The local store's signed PUT: check the signature, the Content-Type and the byte cap, stream to disk."""
    store = deps.objects
    if not isinstance(store, LocalObjectStore):
        raise not_found("Uploads go straight to object storage on this server.")
    try:
        store.verify(path, size or "", mime or "", expires or "", sig or "")
    except SignatureError as exc:
        raise invalid_signature(f"The signed upload URL is not valid: {exc}.") from None
    assert size is not None and mime is not None
    declared = int(size)
    # application/octet-stream is "these bytes" (what generated clients send): the signature binds the type
    if normalize_mime(content_type or "") not in (mime, "application/octet-stream"):
        raise unsupported_media_type(f"Send Content-Type: {mime} (the MIME type the upload URL was signed for) or "
                                     "application/octet-stream.")
    too_large = file_too_large(f"This upload was signed for {declared} bytes.", declared)
    if content_length and content_length.strip().isdigit() and int(content_length) > declared:
        raise too_large
    async with deps.db.read_session() as s:
        row = await upload_store.get_upload(s, path)
    if row is None or row["item_id"] is not None:
        raise invalid_signature("The signed upload URL is no longer valid: the upload was finalized or has expired.")
    try:
        written = await store.write_stream(path, chunks, declared)
    except SizeExceeded:
        raise too_large from None
    return {"path": path, "size": written}


async def finalize(deps: Deps, principal: Principal, body: dict[str, Any], endpoint: str) -> Stored:
    """POST /uploads/finalize (audio, video) and /uploads/finalize-document (PDF, images, text); with
    `source_path`, the file is kept by its path (a new item in the folder its path names, or that path's item
    updated in place, or, for the same bytes, nothing done)."""
    require(principal, "write")
    _no_nul(**{k: body.get(k) for k in ("path", "mime", "filename", "title", "source_path")})
    mime = normalize_mime(body["mime"])
    size = body["size"]
    check_signing(mime, size)
    wanted = finalize_endpoint(mime)
    if wanted != endpoint:
        raise invalid_body(f"{mime} uploads are finalized with POST /api/v1/uploads/{wanted}, not {endpoint}.")
    at = body.get("source_path")
    if at is not None:
        at = source_path(at)
        require_whole_library(principal, "keep files by their path (source_path)")
    path = body["path"]
    try:
        check_path(path)
    except InvalidObjectPath:
        raise object_missing() from None
    async with deps.db.read_session() as s:
        row = await upload_store.get_upload(s, path)
        earlier = await finalized(s, principal, row)
    if earlier is not None:
        return earlier
    if row is None or row["user_id"] != principal.user_id:
        raise object_missing()
    if row["mime"] != mime:
        raise ApiError("mime_mismatch", f"mime {mime} differs from the {row['mime']} this upload was signed for.")
    if media_class(mime) in lifecycle.RECORDINGS and deps.transcriber is None:
        raise transcription_unavailable()
    stored = await deps.objects.stat(path)
    if stored is None:
        raise object_missing()
    if stored != size or size != row["size_bytes"]:
        raise size_mismatch(f"The stored object has {stored} bytes; the upload declared {row['size_bytes']} and "
                            f"this call {size}.")
    folder_id = await folder_for(deps, principal, at) if at is not None else None
    title = (body.get("title") or "").strip() or None
    source = Source(filename=row["filename"], path=path, mime=mime, size=size)
    return await keep_upload(deps, principal, source, title=title, in_kb=body.get("in_kb", True),
                             auto_transform=body.get("auto_transform", True), at=at, folder_id=folder_id)


async def folder_for(deps: Deps, principal: Principal, at: str) -> uuid.UUID | None:
    """The user's folder a file's path names (created when missing), or None for a file at the top."""
    name = sourcepath.folder_of(at.split("/")[:-1])
    if name is None:
        return None
    async with deps.db.transaction() as s:
        ids, _created = await import_store.ensure_folders(s, principal.user_id, [name])
    return ids[name.lower()]


async def keep_upload(deps: Deps, principal: Principal, source: Source, *, title: str | None, in_kb: bool,
                      auto_transform: bool, at: str | None = None, sha256: str | None = None,
                      folder_id: uuid.UUID | None = None) -> Stored:
    """The way in of every stored upload (finalize; each file of a folder's import): its magic bytes checked, read
    (`acquire.file`) and kept (`service.keep`) filed into `folder_id`. Kept by its path `at`, bytes of the SHA-256
    that path already has change nothing (the upload is discarded). An upload that cannot be read is discarded."""
    assert source.path is not None and source.mime is not None
    path, mime = source.path, source.mime
    head = await deps.objects.read_head(path, SNIFF_HEAD)
    if not sniff_matches(mime, head):
        await discard_upload(deps, path)
        raise unsupported_media_type(
            f"The uploaded bytes are not {mime} (their magic bytes do not match); the upload was discarded.")
    try:
        local = await deps.objects.local_copy(path)
    except FileNotFoundError:
        raise object_missing() from None
    try:
        file_at = None
        if at is not None:
            digest = sha256 if sha256 is not None else await asyncio.to_thread(file_sha256, local)
            file_at = FileAt(at, digest, source.size or 0)
            async with deps.db.read_session() as s:
                same = await kept_file(s, principal.user_id, file_at)
            if same is not None:
                await discard_upload(deps, path)
                return same
        filer = await filing(deps, principal, folder_id) if folder_id is not None else principal
        r = Resolved(filer, media_class(mime) or "audio", title, in_kb, auto_transform, file=file_at)
        try:
            acquired = await acquire.file(deps, source, local, title)
        except ApiError:
            await discard_upload(deps, path)  # unreadable: it will never become an item
            raise
        kept = await keep(deps, r, acquired)
        if kept.change == "unchanged":  # the same bytes were kept there meanwhile
            await discard_upload(deps, path)
        return kept
    finally:
        local.unlink(missing_ok=True)


def file_sha256(local: Path) -> str:
    """The SHA-256 of a local file, in hexadecimal (blocking)."""
    with local.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


async def discard_upload(deps: Deps, path: str) -> None:
    """Forget an upload that will never become an item and delete its object (the drain retries failures)."""
    async with deps.db.transaction() as s:
        await upload_store.forget(s, path)
        await upload_store.queue_deletion(s, [path])
    try:
        await deps.objects.delete(path)
        async with deps.db.transaction() as s:
            await upload_store.deletion_done(s, path)
    except Exception as exc:  # the drain retries
        log.warning("could not delete an object now", path=path, error=str(exc)[:300])
