"""The upload and media pipeline: signed URLs, the local PUT, finalize, media URLs and their background jobs.

Flow of a binary: the signed-URL step records a pending upload (`uploads`); the client PUTs the bytes
(to Lev itself for the local store, to S3 otherwise); finalize checks the stored object (exists, size,
magic bytes) and then

- documents (PDF, images) are extracted inside the request and answer `ready`, unless a PDF needs OCR
  on more than `INLINE_OCR_PAGES` pages or is larger than `INLINE_DOC_BYTES`: then the item is stored as
  `processing` and the `extract_document` job finishes it;
- audio and video have their duration read from the file, the transcription quota checked, and are
  stored as `processing` / transcription `pending`; the `transcribe_content` job sends them to the
  Transcriber, stores the transcript, embeds it and charges the measured duration.

Media URLs given to ingest (direct PDF/audio/video links, YouTube) join the same pipeline: direct files
are downloaded through the SSRF-guarded transport into the object store; YouTube goes through yt-dlp.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select, text

from lev import clock, context, documents, quota, runtime, youtube
from lev.chunking import chunk_text, embed_chunks
from lev.errors import (
    ApiError,
    extraction_failed,
    file_too_large,
    ingest_failed,
    invalid_body,
    invalid_signature,
    not_found,
    object_missing,
    size_mismatch,
    transcription_unavailable,
    unsupported_media_type,
)
from lev.media import (
    MAX_UPLOAD_BYTES,
    check_signing,
    finalize_endpoint,
    media_class,
    media_duration_seconds,
    normalize_mime,
    sniff_matches,
)
from lev.policy import Principal, require
from lev.runtime import get_object_store
from lev.transcriber import TranscriptionError, get_transcriber
from lev.webfetch import (
    REDIRECT_CODES,
    USER_AGENT,
    _check_url,
    _GuardedTransport,
    _send,
    _status_error,
    canonical_url,
    check_host,
)
from lev.youtube import youtube_audio
from store import contents as content_store
from store import uploads as upload_store
from store.db import session_scope
from store.models import contents, user_items
from store.objects import (
    InvalidObjectPath,
    LocalObjectStore,
    ObjectStore,
    S3ObjectStore,
    SignatureError,
    SizeExceeded,
    check_path,
)

log = logging.getLogger("lev.media")

SIGNED_URL_TTL_SEC = 3600
UPLOAD_EXPIRY = timedelta(hours=24)
INLINE_OCR_PAGES = 2  # a PDF needing OCR on more pages than this is finished by the worker
INLINE_DOC_BYTES = 20 * 1024 * 1024  # documents larger than this are finished by the worker
INLINE_CHUNK_LIMIT = 200  # more chunks than this: stored now, embedded by the worker
SNIFF_HEAD = 1024

_EXT_MIME = {
    ".pdf": "application/pdf", ".mp3": "audio/mpeg", ".m4a": "audio/mp4", ".wav": "audio/wav",
    ".ogg": "audio/ogg", ".opus": "audio/ogg", ".flac": "audio/flac", ".mp4": "video/mp4",
    ".webm": "video/webm", ".mov": "video/quicktime", ".mkv": "video/webm",
}


def _result(status: str, content_id: uuid.UUID, item_id: uuid.UUID, folder_id: uuid.UUID | None) -> dict[str, Any]:
    return {"status": status, "content_id": str(content_id), "user_item_id": str(item_id),
            "folder_id": str(folder_id) if folder_id else None}


def _transcriber_configured() -> bool:
    return get_transcriber() is not None


# ---------------------------------------------------------------------------------------------- handshake


def _no_nul(**fields: Any) -> None:
    """400 for text PostgreSQL cannot store (U+0000)."""
    for name, value in fields.items():
        if isinstance(value, str) and "\x00" in value:
            raise invalid_body(f"{name} must not contain NUL characters.")


async def signed_url(principal: Principal, *, mime: str, size: int, filename: str) -> dict[str, Any]:
    """Issue a signed PUT URL for one upload and record it as pending."""
    require(principal, "write")
    _no_nul(mime=mime, filename=filename)
    mime = normalize_mime(mime)
    check_signing(mime, size)
    if not filename.strip():
        raise invalid_body("filename must not be blank.")
    store = get_object_store()
    path = store.new_path(str(principal.user_id), filename)
    url = store.signed_put_url(path, size, mime, expires_in=SIGNED_URL_TTL_SEC, base_url=context.base_url())
    now = clock.now()
    async with session_scope() as s:
        await upload_store.create(s, path=path, user_id=principal.user_id, mime=mime, size=size,
                                  filename=filename.strip()[:255], created_at=now)
    return {
        "path": path, "signed_url": url, "finalize_endpoint": finalize_endpoint(mime),
        "method": "PUT", "headers": {"Content-Type": mime},
        "expires_at": (now + timedelta(seconds=SIGNED_URL_TTL_SEC)).isoformat(),
    }


async def receive_upload(path: str, *, expires: str | None, size: str | None, mime: str | None,
                         sig: str | None, content_type: str | None, content_length: str | None,
                         chunks: Any) -> dict[str, Any]:
    """The local store's signed PUT: check the signature, the Content-Type and the byte cap, stream to disk."""
    store = get_object_store()
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
    if content_length and content_length.strip().isdigit() and int(content_length) > declared:
        raise file_too_large(f"This upload was signed for {declared} bytes.", max_bytes=declared)
    async with session_scope() as s:
        row = await upload_store.get(s, path)
    if row is None or row["item_id"] is not None:
        raise invalid_signature("The signed upload URL is no longer valid: the upload was finalized or has expired.")
    try:
        written = await store.write_stream(path, chunks, declared)
    except SizeExceeded:
        raise file_too_large(f"This upload was signed for {declared} bytes.",
                       max_bytes=declared) from None
    return {"path": path, "size": written}


# ---------------------------------------------------------------------------------------------- finalize


async def finalize(principal: Principal, body: dict[str, Any], endpoint: str) -> dict[str, Any]:
    """POST /uploads/finalize (audio, video) and /uploads/finalize-document (PDF, images)."""
    require(principal, "write")
    _no_nul(**{k: body.get(k) for k in ("path", "mime", "filename", "title")})
    mime = normalize_mime(body["mime"])
    size = body["size"]
    check_signing(mime, size)
    wanted = finalize_endpoint(mime)
    if wanted != endpoint:
        raise invalid_body(f"{mime} uploads are finalized with POST /api/v1/uploads/{wanted}, not {endpoint}.")
    path = body["path"]
    try:
        check_path(path)
    except InvalidObjectPath:
        raise object_missing() from None
    async with session_scope() as s:
        row = await upload_store.get(s, path)
        existing = await _existing(s, row, principal)
    if existing is not None:
        return existing
    if row is None or row["user_id"] != principal.user_id:
        raise object_missing()
    if row["mime"] != mime:
        raise invalid_body(f"mime {mime} differs from the {row['mime']} this upload was signed for.")
    klass = media_class(mime)
    if klass in ("audio", "video") and not _transcriber_configured():
        raise transcription_unavailable()
    store = get_object_store()
    stored = await store.stat(path)
    if stored is None:
        raise object_missing()
    if stored != size or size != row["size_bytes"]:
        raise size_mismatch(f"The stored object has {stored} bytes; the upload declared {row['size_bytes']} and this "
                       f"call {size}.")
    head = await store.read_head(path, SNIFF_HEAD)
    if not sniff_matches(mime, head):
        await _discard_upload(path)
        raise unsupported_media_type(
            f"The uploaded bytes are not {mime} (their magic bytes do not match); the upload was discarded.")
    title = (body.get("title") or "").strip() or None
    opts = {"in_kb": body.get("in_kb", True), "auto_transform": body.get("auto_transform", True)}
    source = _Source(path=path, mime=mime, size=size, filename=row["filename"], url=None, canonical=None)
    try:
        local = await store.local_copy(path)
    except FileNotFoundError:
        raise object_missing() from None
    try:
        if klass == "document":
            return await _ingest_document(principal, source, local, title, discard_on_failure=True, **opts)
        return await _ingest_media(principal, source, local, klass or "audio", title, **opts)
    finally:
        local.unlink(missing_ok=True)


async def _existing(s: Any, row: dict[str, Any] | None, principal: Principal) -> dict[str, Any] | None:
    """The earlier answer of a finalize retried for the same upload (None when there is none)."""
    if row is None or row["item_id"] is None or row["user_id"] != principal.user_id:
        return None
    item = await upload_store.item_state(s, row["item_id"])
    if item is None:
        return None
    folder = (await s.execute(text("SELECT folder_id FROM item_folders WHERE item_id = :i LIMIT 1"),
                              {"i": item["id"]})).scalar()
    return _result(_status_of(item), item["content_id"], item["id"], folder)


def _status_of(item: dict[str, Any]) -> str:
    if item["kind"] in ("audio", "video", "youtube") and item["transcription_status"] in ("pending", "failed"):
        return "transcribing"
    if item["status"] == "ready":
        return "ready"
    return "processing"


async def _discard_upload(path: str) -> None:
    """Forget an upload that will never become an item and queue its object for deletion."""
    async with session_scope() as s:
        await upload_store.forget(s, path)
        await upload_store.queue_deletion(s, [path])
    try:
        await get_object_store().delete(path)
        async with session_scope() as s:
            await upload_store.deletion_done(s, path)
    except Exception as exc:  # the drain retries
        log.warning("could not delete %s now: %s", path, exc)


class _Source:
    """Where the bytes came from: an upload path (always set once stored) and, for URL ingest, the URL."""
    def __init__(self, *, path: str | None, mime: str | None, size: int | None, filename: str,
                 url: str | None, canonical: str | None) -> None:
        self.path = path
        self.mime = mime
        self.size = size
        self.filename = filename
        self.url = url
        self.canonical = canonical


# ---------------------------------------------------------------------------------------------- documents


def _pdf_plan(path: Path) -> tuple[int, int]:
    """(page count, pages without a usable text layer) of a PDF; 422 extraction_failed when unreadable."""
    import pypdfium2 as pdfium


    with documents._PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError as exc:
            raise extraction_failed(f"The PDF could not be read (corrupt or password-protected): {exc}") from None
        try:
            count = len(pdf)
            textless = 0
            for index in range(min(count, documents.MAX_PDF_PAGES)):
                page = pdf[index]
                try:
                    tp = page.get_textpage()
                    if documents._meaningful(tp.get_text_range()) < documents.MIN_TEXT_CHARS:
                        textless += 1
                    tp.close()
                finally:
                    page.close()
                if textless > INLINE_OCR_PAGES:
                    break
        except pdfium.PdfiumError as exc:
            raise extraction_failed(f"The PDF could not be read: {exc}") from None
        finally:
            pdf.close()
    if count == 0:
        raise extraction_failed("The PDF has no pages.")
    return count, textless


def _extract(path: Path, mime: str) -> tuple[str, dict[str, Any]]:
    """Text and metadata of a document file (blocking; run in a thread)."""
    if mime == "application/pdf":
        pages, meta = documents.extract_pdf(path)
        return "\n\n".join(p.text for p in pages if p.text.strip()), meta
    return documents.extract_image(path)


def _doc_title(title: str | None, meta: dict[str, Any], filename: str) -> str:
    return title or meta.get("title") or filename


async def _ingest_document(principal: Principal, source: _Source, local: Path, title: str | None, *,
                           in_kb: bool, auto_transform: bool, discard_on_failure: bool) -> dict[str, Any]:
    mime = source.mime or "application/pdf"
    kind = "pdf" if mime == "application/pdf" else "image"
    queued = (source.size or 0) > INLINE_DOC_BYTES
    try:
        if kind == "pdf" and not queued:
            _pages, textless = await asyncio.to_thread(_pdf_plan, local)
            queued = textless > INLINE_OCR_PAGES
        elif kind == "pdf":
            await asyncio.to_thread(_pdf_plan, local)  # a corrupt PDF is refused now, not by the worker
        body, meta = ("", {}) if queued else await asyncio.to_thread(_extract, local, mime)
    except ApiError:
        if discard_on_failure and source.path:
            await _discard_upload(source.path)
        raise
    meta = {**meta, "filename": source.filename}
    if source.url:
        meta["source_url"] = source.url
    bodies: list[str] = []
    vectors: list[Any] = []
    status = "processing" if queued else "ready"
    if not queued:
        doc_title = _doc_title(title, meta, source.filename)
        bodies = await asyncio.to_thread(chunk_text, body, doc_title) if body.strip() else []
        if len(bodies) > INLINE_CHUNK_LIMIT:
            status = "processing"
        else:
            vectors = await embed_chunks(doc_title, bodies)
    stored = await _store(principal, source, kind=kind, title=_doc_title(title, meta, source.filename),
                          text_body=body or None, metadata=meta, status=status, bodies=bodies, vectors=vectors,
                          in_kb=in_kb, auto_transform=auto_transform)
    if stored.pop("_new", False):
        cid = uuid.UUID(stored["content_id"])
        if queued:
            await runtime.enqueue("extract_document", str(cid))
        elif status == "processing":
            await runtime.enqueue("process_content", str(cid))
        elif auto_transform:
            await runtime.enqueue("transform_item", stored["user_item_id"])
    return stored


async def _store(principal: Principal, source: _Source, *, kind: str, title: str | None, text_body: str | None,
                 metadata: dict[str, Any], status: str, bodies: list[str], vectors: list[Any], in_kb: bool,
                 auto_transform: bool, transcription_status: str = "not_required", duration: float | None = None,
                 quota_seconds: float | None = None) -> dict[str, Any]:
    """Insert the content, its chunks and the user item in one transaction (idempotent per upload path)."""
    folder_id = principal.new_item_folder
    result_status = "transcribing" if transcription_status == "pending" else status
    async with session_scope() as s:
        if source.url is None and source.path is not None:
            row = await upload_store.get(s, source.path, for_update=True)
            if row is None:
                raise object_missing()
            existing = await _existing(s, row, principal)
            if existing is not None:  # a concurrent finalize won
                return existing
        if quota_seconds is not None:
            await quota.reserve(s, principal.user_id, principal.tier, quota_seconds)
        content_id = await content_store.create(
            s, kind=kind, title=title, text=text_body, url=source.url, canonical_url=source.canonical,
            metadata=metadata, status=status, mime=source.mime, object_path=source.path, size_bytes=source.size,
            duration_sec=duration,
        )
        if content_id is None:  # the same URL was stored meanwhile: keep ours unshared
            content_id = await content_store.create(
                s, kind=kind, title=title, text=text_body, url=source.url, canonical_url=None, metadata=metadata,
                status=status, mime=source.mime, object_path=source.path, size_bytes=source.size,
                duration_sec=duration,
            )
            assert content_id is not None
        if bodies and vectors:
            await content_store.add_chunks(s, content_id, title, bodies, vectors)
        item_id = await content_store.create_item(
            s, user_id=principal.user_id, content_id=content_id, kind=kind, title=title, url=source.url,
            in_kb=in_kb, auto_transform=auto_transform, status=status, transcription_status=transcription_status,
            folder_id=folder_id, created_by=principal.token_id,
        )
        if item_id is None:  # the token's folder was deleted while the request ran
            raise not_found()
        if source.url is None and source.path is not None:
            await upload_store.set_item(s, source.path, item_id)
    return {"_new": True, **_result(result_status, content_id, item_id, folder_id)}


# ---------------------------------------------------------------------------------------------- audio / video


async def _ingest_media(principal: Principal, source: _Source, local: Path, kind: str, title: str | None, *,
                        in_kb: bool, auto_transform: bool) -> dict[str, Any]:
    try:
        duration = await asyncio.to_thread(media_duration_seconds, local)
    except ApiError:
        if source.url is None and source.path:
            await _discard_upload(source.path)
        raise
    meta: dict[str, Any] = {"filename": source.filename, "duration_sec": round(duration, 3)}
    if source.url:
        meta["source_url"] = source.url
    stored = await _store(principal, source, kind=kind, title=title or source.filename, text_body=None,
                          metadata=meta, status="processing", bodies=[], vectors=[], in_kb=in_kb,
                          auto_transform=auto_transform, transcription_status="pending", duration=duration,
                          quota_seconds=duration)
    if stored.pop("_new", False):
        await runtime.enqueue("transcribe_content", stored["content_id"], str(principal.user_id))
    return stored


# ---------------------------------------------------------------------------------------------- URLs


async def ingest_media_url(principal: Principal, url: str, kind: str, *, title: str | None, in_kb: bool,
                           auto_transform: bool) -> dict[str, Any]:
    """Ingest of a YouTube, PDF, audio or video URL (called by lev.ingest for such URLs)."""
    if kind == "youtube":
        return await _ingest_youtube(principal, url, title, in_kb, auto_transform)
    if kind in ("audio", "video") and not _transcriber_configured():
        raise transcription_unavailable()

    try:
        canonical = canonical_url(url)
    except ValueError:
        raise ingest_failed("the URL cannot be parsed") from None
    shared = await _share_existing(principal, canonical, url, title, in_kb, auto_transform)
    if shared is not None:
        return shared
    try:
        return await _ingest_downloaded(principal, url, kind, canonical, title, in_kb, auto_transform)
    except ApiError as exc:
        if exc.code == "extraction_failed":  # /ingest answers the spec's descriptive 400 for unreadable files
            what = "PDF" if kind == "pdf" else f"{kind} file"
            raise ingest_failed(f"the {what} at this URL could not be read: {exc.message}") from None
        raise


async def _ingest_downloaded(principal: Principal, url: str, kind: str, canonical: str, title: str | None,
                             in_kb: bool, auto_transform: bool) -> dict[str, Any]:
    local, mime, final_url = await _download(url, kind)
    store = get_object_store()
    try:
        size = local.stat().st_size
        filename = PurePosixPath(urlsplit(final_url).path).name or f"download{Path(local).suffix}"
        klass = media_class(mime)
        if klass in ("audio", "video"):
            duration = await asyncio.to_thread(media_duration_seconds, local)

            async with session_scope() as s:  # refuse before storing anything
                await quota.check(s, principal.user_id, principal.tier, duration)
        path = store.new_path(str(principal.user_id), filename)
        await _put_file(store, path, local, mime)
        source = _Source(path=path, mime=mime, size=size, filename=filename, url=url, canonical=canonical)
        try:
            if klass == "document":
                return await _ingest_document(principal, source, local, title, in_kb=in_kb,
                                              auto_transform=auto_transform, discard_on_failure=False)
            return await _ingest_media(principal, source, local, klass or "audio", title, in_kb=in_kb,
                                       auto_transform=auto_transform)
        except BaseException:
            await _queue_object_deletion(path)
            raise
    finally:
        local.unlink(missing_ok=True)


async def _queue_object_deletion(path: str) -> None:
    async with session_scope() as s:
        await upload_store.queue_deletion(s, [path])


async def _share_existing(principal: Principal, canonical: str, url: str, title: str | None, in_kb: bool,
                          auto_transform: bool) -> dict[str, Any] | None:
    """A new item on the content someone already stored for this URL (no second download or charge)."""
    async with session_scope() as s:
        row = (await s.execute(select(contents.c.id, contents.c.kind, contents.c.title, contents.c.status,
                                      contents.c.transcript, contents.c.mime)
                               .where(contents.c.canonical_url == canonical)
                               .with_for_update(read=True, key_share=True))).first()
        if row is None:
            return None
        if row.status == "failed":
            await content_store.update_content(s, row.id, canonical_url=None)
            return None
        media = row.kind in ("audio", "video", "youtube")
        tstatus = ("done" if row.status == "ready" else "pending") if media else "not_required"
        folder_id = principal.new_item_folder
        item_id = await content_store.create_item(
            s, user_id=principal.user_id, content_id=row.id, kind=row.kind, title=title or row.title, url=url,
            in_kb=in_kb, auto_transform=auto_transform, status=row.status, transcription_status=tstatus,
            folder_id=folder_id, created_by=principal.token_id,
        )
        if item_id is None:  # the token's folder was deleted while the request ran
            raise not_found()
    if row.status == "ready" and auto_transform:
        await runtime.enqueue("transform_item", str(item_id))
    status = "transcribing" if tstatus == "pending" else ("ready" if row.status == "ready" else "processing")
    return _result(status, row.id, item_id, folder_id)


async def _download(url: str, kind: str) -> tuple[Path, str, str]:
    """Fetch a media URL through the SSRF-guarded transport into a temp file (at most 50 MB)."""
    import httpx


    try:
        current = httpx.URL(url.strip())
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise ingest_failed(f"invalid URL: {exc}") from exc
    _check_url(current)
    fd, name = tempfile.mkstemp(prefix="lev-dl-")
    local = Path(name)
    try:
        async with asyncio.timeout(300), httpx.AsyncClient(
            transport=_GuardedTransport(), timeout=httpx.Timeout(60.0, connect=10.0),
            headers={"User-Agent": USER_AGENT}, follow_redirects=False, trust_env=False,
        ) as client:
            for _hop in range(6):
                resp = await _send(client, current)
                try:
                    if resp.status_code in REDIRECT_CODES and "location" in resp.headers:
                        current = resp.url.join(resp.headers["location"])
                        _check_url(current)
                        continue
                    if resp.status_code >= 400:
                        raise _status_error(resp.status_code)
                    if resp.status_code != 200:
                        raise ingest_failed(f"unexpected response from the site (HTTP {resp.status_code})")
                    declared = resp.headers.get("content-length", "")
                    if declared.isdigit() and int(declared) > MAX_UPLOAD_BYTES:
                        raise ingest_failed("the file is larger than 50 MB")
                    total = 0
                    fh = _open_fd(fd)
                    try:
                        async for piece in resp.aiter_bytes():
                            total += len(piece)
                            if total > MAX_UPLOAD_BYTES:
                                raise ingest_failed("the file is larger than 50 MB")
                            await asyncio.to_thread(fh.write, piece)
                    finally:
                        fh.close()
                    ctype = normalize_mime(resp.headers.get("content-type", ""))
                    final = str(resp.url)
                finally:
                    await resp.aclose()
                break
            else:
                raise ingest_failed("too many redirects (more than 5)")
        mime = _pick_mime(ctype, final, kind)
        head = await asyncio.to_thread(_read_head, local)
        if not head:
            raise ingest_failed("the URL served an empty file")
        if not sniff_matches(mime, head):
            what = {"pdf": "PDF", "audio": "audio file", "video": "video file"}.get(kind, kind)
            raise ingest_failed(f"the URL did not serve a valid {what} ({ctype or 'no content type'})")
        return local, mime, final
    except TimeoutError:
        _rm(local)
        raise ingest_failed("the download took longer than 300 s") from None
    except BaseException:
        _rm(local)
        raise


def _open_fd(fd: int) -> Any:
    return open(fd, "wb", closefd=True)  # noqa: SIM115 (closed by the caller)


def _read_head(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.read(SNIFF_HEAD)


def _rm(path: Path) -> None:
    path.unlink(missing_ok=True)


def _size(path: Path) -> int:
    return path.stat().st_size


def _pick_mime(ctype: str, url: str, kind: str) -> str:
    klass = media_class(ctype) if ctype else None
    if klass is not None and (klass == "document") == (kind == "pdf"):
        return ctype
    ext = PurePosixPath(urlsplit(url).path).suffix.lower()
    guess = _EXT_MIME.get(ext)
    if guess:
        return guess
    return {"pdf": "application/pdf", "audio": "audio/mpeg", "video": "video/mp4"}.get(kind, ctype)


async def _put_file(store: ObjectStore, path: str, local: Path, mime: str) -> None:
    """Put a server-side file into the object store (the ObjectStore protocol has no server-side put)."""
    if isinstance(store, LocalObjectStore):
        async def chunks() -> Any:
            with local.open("rb") as fh:
                while piece := await asyncio.to_thread(fh.read, 1 << 20):
                    yield piece

        await store.write_stream(path, chunks(), _size(local))
    elif isinstance(store, S3ObjectStore):
        await asyncio.to_thread(store._client.upload_file, str(local), store.bucket, path,
                                ExtraArgs={"ContentType": mime})
    else:  # pragma: no cover - a new store type must say how to put a file
        raise RuntimeError(f"cannot store files in {type(store).__name__}")


async def _ingest_youtube(principal: Principal, url: str, title: str | None, in_kb: bool,
                          auto_transform: bool) -> dict[str, Any]:
    canonical = youtube.canonical_url(url)
    # yt-dlp does its own networking and cannot use the guarded transport: at least the YouTube host
    # itself must resolve to public addresses (the URL was already matched against YouTube's hosts).
    parts = urlsplit(url.strip())
    await check_host(parts.hostname or "www.youtube.com", parts.port or 443)
    shared = await _share_existing(principal, canonical, canonical, title, in_kb, auto_transform)
    if shared is not None:
        return shared
    info = await youtube.youtube_info(canonical)
    meta = {k: info.get(k) for k in ("id", "channel", "upload_date", "duration", "description")
            if info.get(k) is not None}
    doc_title = title or info.get("title") or canonical
    captions = await youtube.youtube_captions(info) if info.get("has_captions") else None
    source = _Source(path=None, mime=None, size=None, filename=info.get("id") or "video", url=canonical,
                     canonical=canonical)
    duration = float(info["duration"]) if isinstance(info.get("duration"), (int, float)) else None
    if captions:
        meta["transcript_source"] = "captions"
        bodies = await asyncio.to_thread(chunk_text, captions, doc_title)
        vectors = await embed_chunks(doc_title, bodies)
        stored = await _store(principal, source, kind="youtube", title=doc_title, text_body=None, metadata=meta,
                              status="ready", bodies=bodies, vectors=vectors, in_kb=in_kb,
                              auto_transform=auto_transform, transcription_status="done", duration=duration)
        async with session_scope() as s:
            await content_store.update_content(s, uuid.UUID(stored["content_id"]), transcript=captions)
        if stored.pop("_new", False) and auto_transform:
            await runtime.enqueue("transform_item", stored["user_item_id"])
        return stored
    if not _transcriber_configured():
        raise transcription_unavailable()
    meta["transcript_source"] = "transcription"
    stored = await _store(principal, source, kind="youtube", title=doc_title, text_body=None, metadata=meta,
                          status="processing", bodies=[], vectors=[], in_kb=in_kb, auto_transform=auto_transform,
                          transcription_status="pending", duration=duration, quota_seconds=duration or 0.0)
    if stored.pop("_new", False):
        await runtime.enqueue("transcribe_content", stored["content_id"], str(principal.user_id))
    return stored


# ---------------------------------------------------------------------------------------------- jobs


async def _fail_content(content_id: uuid.UUID, message: str, *, transcription: bool) -> None:
    values: dict[str, Any] = {"status": "failed", "error": message[:1000]}
    async with session_scope() as s:
        await content_store.update_content(s, content_id, **values)
        if transcription:
            values["transcription_status"] = "failed"
        await content_store.set_items_status(s, content_id, **values)


async def _finish(content_id: uuid.UUID, title: str | None, body: str, content_values: dict[str, Any],
                  item_values: dict[str, Any], charge: tuple[uuid.UUID, float] | None = None) -> int:
    """Chunk, embed and store `body`, mark the content and its items ready, charge, queue transforms."""
    bodies = await asyncio.to_thread(chunk_text, body, title) if body.strip() else []
    vectors = await embed_chunks(title, bodies) if bodies else []
    async with session_scope() as s:
        alive = (await s.execute(select(contents.c.id).where(contents.c.id == content_id).with_for_update())).first()
        if alive is None:  # deleted while we worked
            return 0
        await content_store.add_chunks(s, content_id, title, bodies, vectors)
        await content_store.update_content(s, content_id, status="ready", error=None, **content_values)
        await content_store.set_items_status(s, content_id, status="ready", error=None, **item_values)
        if charge is not None:
            await quota.charge(s, charge[0], charge[1])
        todo = list((await s.execute(select(user_items.c.id).where(
            user_items.c.content_id == content_id, user_items.c.auto_transform.is_(True)))).scalars())
    for item_id in todo:
        await runtime.enqueue("transform_item", str(item_id))
    return len(bodies)


async def _content_row(content_id: uuid.UUID) -> Any:
    async with session_scope() as s:
        return (await s.execute(select(contents).where(contents.c.id == content_id))).first()


async def run_extract_document(content_id: str) -> int:
    """Job body: extract a queued document (OCR-heavy or large PDF), then embed it."""
    cid = uuid.UUID(content_id)
    row = await _content_row(cid)
    if row is None or row.status != "processing" or not row.object_path:
        return 0
    try:
        local = await get_object_store().local_copy(row.object_path)
    except FileNotFoundError:
        await _fail_content(cid, "the uploaded file is gone", transcription=False)
        return 0
    try:
        body, meta = await asyncio.to_thread(_extract, local, row.mime)
    except ApiError as exc:
        await _fail_content(cid, exc.message or exc.code, transcription=False)
        return 0
    except Exception as exc:
        log.exception("document extraction failed for %s", content_id)
        await _fail_content(cid, f"extraction failed: {exc}", transcription=False)
        return 0
    finally:
        local.unlink(missing_ok=True)
    metadata = {**(row.metadata or {}), **meta}
    title = row.title
    return await _finish(cid, title, body, {"text": body, "metadata": metadata}, {})


async def run_transcription(content_id: str, user_id: str) -> int:
    """Job body: send the media to the Transcriber, store and embed the transcript, charge the duration."""
    cid = uuid.UUID(content_id)
    row = await _content_row(cid)
    if row is None or row.status != "processing":
        return 0
    transcriber = get_transcriber()
    if transcriber is None:
        await _fail_content(cid, "transcription is not configured on this server", transcription=True)
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="lev-media-"))
    try:
        if row.object_path:
            local = await get_object_store().local_copy(row.object_path)
            mime, filename = row.mime, PurePosixPath(row.object_path).name
        elif row.kind == "youtube" and row.url:
            local = await youtube_audio(row.url, workdir)
            mime = _EXT_MIME.get(local.suffix.lower(), "audio/mp4")
            if local.suffix.lower() == ".webm":
                mime = "audio/webm"
            filename = local.name
        else:
            await _fail_content(cid, "there is no media to transcribe", transcription=True)
            return 0
        try:
            duration = await asyncio.to_thread(media_duration_seconds, local)
            transcript = await transcriber.transcribe(local, mime, filename)
        finally:
            local.unlink(missing_ok=True)
    except TranscriptionError as exc:
        await _fail_content(cid, str(exc), transcription=True)
        return 0
    except ApiError as exc:
        await _fail_content(cid, exc.message or exc.code, transcription=True)
        return 0
    except FileNotFoundError:
        await _fail_content(cid, "the media file is gone", transcription=True)
        return 0
    except Exception as exc:
        log.exception("transcription failed for %s", content_id)
        await _fail_content(cid, f"transcription failed: {exc}", transcription=True)
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    metadata = {**(row.metadata or {}), "duration_sec": round(duration, 3)}
    if transcript.language:
        metadata["language"] = transcript.language
    if transcript.segments:
        metadata["segments"] = len(transcript.segments)
    return await _finish(
        cid, row.title, transcript.text,
        {"transcript": transcript.text, "duration_sec": duration, "metadata": metadata},
        {"transcription_status": "done"}, charge=(uuid.UUID(user_id), duration),
    )


async def drain_object_deletions() -> int:
    """Delete queued objects from the object store; failures stay queued with attempts + 1."""
    store = get_object_store()
    done = 0
    async with session_scope() as s:
        for row in await upload_store.pending_deletions(s):
            path = row["path"]
            if await upload_store.still_referenced(s, path):
                await upload_store.deletion_done(s, path)
                continue
            try:
                await store.delete(path)
            except InvalidObjectPath:
                await upload_store.deletion_done(s, path)  # nothing we could ever have stored there
            except Exception as exc:
                await upload_store.deletion_failed(s, path, f"{type(exc).__name__}: {exc}")
                log.warning("object deletion failed for %s (attempt %d): %s", path, row["attempts"] + 1, exc)
            else:
                await upload_store.deletion_done(s, path)
                done += 1
    return done


async def expire_uploads() -> int:
    """Forget uploads signed more than 24 h ago and delete objects no item uses; then drain."""
    async with session_scope() as s:
        paths = await upload_store.expire_before(s, clock.now() - UPLOAD_EXPIRY)
    if paths:
        await drain_object_deletions()
    return len(paths)
