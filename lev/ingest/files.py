"""Documents and media from a local file (an upload being finalized, or a file downloaded from a URL).

Documents (PDF, images) are extracted in the request and answer `ready`, unless a PDF needs OCR on more than
`INLINE_OCR_PAGES` pages or is larger than `INLINE_DOC_BYTES`: then the `extract_document` job finishes them.
Audio and video have their duration read and the transcription quota reserved; the `transcribe_content` job
sends them to the Transcriber.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from lev import runtime
from lev.auth.policy import Principal
from lev.core.errors import ApiError
from lev.ingest.documents import INLINE_OCR_PAGES, extract, pdf_plan
from lev.ingest.media import media_duration_seconds
from lev.ingest.save import INLINE_CHUNK_LIMIT, Chunks, Source, Stored, prepare, store_item
from store import uploads as upload_store
from store.db import transaction

log = logging.getLogger("lev.media")

INLINE_DOC_BYTES = 20 * 1024 * 1024  # documents larger than this are finished by the worker


async def discard_upload(path: str) -> None:
    """Forget an upload that will never become an item and delete its object (the drain retries failures)."""
    async with transaction() as s:
        await upload_store.forget(s, path)
        await upload_store.queue_deletion(s, [path])
    try:
        await runtime.get_object_store().delete(path)
        async with transaction() as s:
            await upload_store.deletion_done(s, path)
    except Exception as exc:  # the drain retries
        log.warning("could not delete %s now: %s", path, exc)


async def ingest_document(principal: Principal, source: Source, local: Path, title: str | None, *,
                          in_kb: bool, auto_transform: bool) -> Stored:
    """A PDF or image: extracted, chunked and embedded now, or queued for the worker when heavy."""
    mime = source.mime or "application/pdf"
    kind = "pdf" if mime == "application/pdf" else "image"
    queued = (source.size or 0) > INLINE_DOC_BYTES
    try:
        if kind == "pdf":
            _pages, textless = await asyncio.to_thread(pdf_plan, local)  # a corrupt PDF is refused now
            queued = queued or textless > INLINE_OCR_PAGES
        body, meta = ("", {}) if queued else await asyncio.to_thread(extract, local, mime)
    except ApiError:
        if source.upload and source.path:
            await discard_upload(source.path)
        raise
    meta = {**meta, "filename": source.filename}
    if source.url:
        meta["source_url"] = source.url
    doc_title = title or meta.get("title") or source.filename
    chunks = Chunks() if queued else await prepare(doc_title, body, inline_limit=INLINE_CHUNK_LIMIT)
    status = "ready" if not queued and chunks.embedded else "processing"
    stored = await store_item(principal, source, kind=kind, title=doc_title, text=body or None, metadata=meta,
                              status=status, chunks=chunks, in_kb=in_kb, auto_transform=auto_transform)
    if stored.new and queued:
        await runtime.enqueue("extract_document", str(stored.content_id))
    elif stored.new and status == "processing":
        await runtime.enqueue("process_content", str(stored.content_id))
    return stored


async def ingest_media(principal: Principal, source: Source, local: Path, kind: str, title: str | None, *,
                       in_kb: bool, auto_transform: bool) -> Stored:
    """Audio or video: stored as pending transcription within the quota, transcribed by the worker."""
    try:
        duration = await asyncio.to_thread(media_duration_seconds, local)
    except ApiError:
        if source.upload and source.path:
            await discard_upload(source.path)
        raise
    meta: dict[str, Any] = {"filename": source.filename, "duration_sec": round(duration, 3)}
    if source.url:
        meta["source_url"] = source.url
    stored = await store_item(principal, source, kind=kind, title=title or source.filename, text=None, metadata=meta,
                              status="processing", chunks=Chunks(), in_kb=in_kb, auto_transform=auto_transform,
                              transcription_status="pending", duration=duration, quota_seconds=duration)
    if stored.new:
        await runtime.enqueue("transcribe_content", str(stored.content_id), str(principal.user_id))
    return stored
