"""`POST /ingest` and MCP `add_to_knowledge`: a text snippet or a URL (web page, YouTube, PDF, audio, video).

Text and web pages are fetched, extracted, chunked, embedded and stored inside the request, so the item is
searchable when the call returns (`ready`); texts of more than `INLINE_CHUNK_LIMIT` chunks are stored at once and
embedded by the worker (`processing`). Media URLs join the upload pipeline: direct files are downloaded through
the SSRF guard into the object store, YouTube goes through yt-dlp (captions first, else transcription).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from lev import runtime
from lev.auth.policy import Principal, filing_target, require
from lev.core.errors import ApiError, folder_not_found, ingest_failed, invalid_body, transcription_unavailable
from lev.ingest import capture, youtube
from lev.ingest.download import download
from lev.ingest.files import ingest_document, ingest_media
from lev.ingest.media import media_class, media_duration_seconds
from lev.ingest.save import (
    INLINE_CHUNK_LIMIT,
    Chunks,
    Source,
    Stored,
    prepare,
    prepare_timed,
    queue_after_share,
    share_existing,
    store_item,
)
from lev.ingest.transcriber import get_transcriber
from lev.ingest.urls import canonical_url, classify_media_url
from lev.ingest.webpage import UnsupportedMedia, fetch_page
from lev.limits import quota
from lev.net.guard import check_host
from store import folders as folder_store
from store import uploads as upload_store
from store.db import transaction

MAX_TEXT_CHARS = 1_000_000
MAX_URL_CHARS = 4096


async def ingest(
    principal: Principal, *, kind: str, url: str | None = None, text: str | None = None, title: str | None = None,
    in_kb: bool = True, auto_transform: bool = False, folder_id: uuid.UUID | None = None, html: str | None = None,
    source_url: str | None = None,
) -> dict[str, Any]:
    """Add a text snippet (with the `source_url` of the page it came from, if any), a URL, or a page captured in
    the user's browser (`html`, lev.ingest.capture) to the caller's library, filed into `folder_id` when given (else
    by the scope-size-1 rule); returns the Ingest result."""
    require(principal, "write")
    for name, value in (("url", url), ("text", text), ("title", title), ("html", html), ("source_url", source_url)):
        if value is not None and "\x00" in value:  # PostgreSQL text cannot hold NUL
            raise invalid_body(f"{name} must not contain NUL characters.")
    title = title.strip() or None if title else None
    if kind == "page":  # a page as the user's browser rendered it: the user's own content, never shared
        page = capture.check(url, html, text)
        principal = await _filing(principal, folder_id)
        return (await capture.save(principal, page, title=title, in_kb=in_kb, auto_transform=auto_transform)).answer()
    if html is not None:
        raise invalid_body("only kind 'page' takes `html`.")
    if kind == "text":
        if url is not None:
            raise invalid_body("kind 'text' takes `text`, not `url`.")
        if text is None or not text.strip():
            raise invalid_body("kind 'text' needs a non-empty `text`.")
        if len(text) > MAX_TEXT_CHARS:
            raise invalid_body(f"text is limited to {MAX_TEXT_CHARS} characters.")
        metadata: dict[str, Any] = {} if title else {"title_from_text": True}
        if source_url is not None:  # a selection saved from a page: the note keeps where it came from
            metadata["source_url"] = capture.check_source_url(source_url, "source_url")
        principal = await _filing(principal, folder_id)
        stored = await _store_text(principal, kind="text", title=title or title_from_text(text), body=text,
                                   source=Source(filename=""), metadata=metadata, in_kb=in_kb,
                                   auto_transform=auto_transform)
        return stored.answer()
    if source_url is not None:
        raise invalid_body("only kind 'text' takes `source_url`.")
    if kind == "url":
        if text is not None:
            raise invalid_body("kind 'url' takes `url`, not `text`.")
        if not url or not url.strip():
            raise invalid_body("kind 'url' needs a `url`.")
        if len(url) > MAX_URL_CHARS:
            raise invalid_body(f"url is limited to {MAX_URL_CHARS} characters.")
        principal = await _filing(principal, folder_id)
        return (await _ingest_url(principal, url.strip(), title, in_kb, auto_transform)).answer()
    raise invalid_body("kind must be 'url', 'text' or 'page'.")


async def _filing(principal: Principal, folder_id: uuid.UUID | None) -> Principal:
    """The principal filing into `folder_id`: 403 forbidden_scope outside a scoped token's folders, 404
    folder_not_found (with `missing`) when the user has no such folder."""
    filing = filing_target(principal, folder_id)
    if folder_id is not None:
        async with transaction() as s:
            if not await folder_store.owned_ids(s, principal.user_id, [folder_id]):
                raise folder_not_found("There is no such folder.", missing=[str(folder_id)])
    return filing


def title_from_text(text: str, limit: int = 80) -> str:
    """A snippet's title when none is given: its first line, cut at a word boundary."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) <= limit:
        return first
    cut = first[:limit].rsplit(" ", 1)[0]
    return (cut or first[:limit]) + "…"


async def _store_text(principal: Principal, *, kind: str, title: str | None, body: str, source: Source,
                      metadata: dict[str, Any], in_kb: bool, auto_transform: bool) -> Stored:
    chunks = await prepare(title, body, inline_limit=INLINE_CHUNK_LIMIT)
    if not chunks.bodies:
        raise ingest_failed("there is no text to store")
    status = "ready" if chunks.embedded else "processing"
    stored = await store_item(principal, source, kind=kind, title=title, text=body, metadata=metadata,
                              status=status, chunks=chunks, in_kb=in_kb, auto_transform=auto_transform)
    if stored.new and status == "processing":
        await runtime.enqueue("process_content", str(stored.content_id))
    return stored


async def _shared(principal: Principal, canonical: str, url: str, title: str | None, in_kb: bool,
                  auto_transform: bool) -> Stored | None:
    """A new item on what someone already stored for this URL, or None to fetch it afresh."""
    async with transaction() as s:
        shared = await share_existing(s, principal, canonical, url, title, in_kb=in_kb, auto_transform=auto_transform)
    if shared is not None:
        await queue_after_share(shared, auto_transform)
    return shared


async def _canonical_or_shared(principal: Principal, url: str, title: str | None, in_kb: bool,
                               auto_transform: bool) -> tuple[str, Stored | None]:
    """The URL's canonical form and, when someone already stored it, the caller's new item on that content."""
    try:
        canonical = canonical_url(url)
    except ValueError:
        raise ingest_failed("the URL cannot be parsed") from None
    return canonical, await _shared(principal, canonical, url, title, in_kb, auto_transform)


async def _ingest_url(principal: Principal, url: str, title: str | None, in_kb: bool,
                      auto_transform: bool) -> Stored:
    if not url.lower().startswith(("http://", "https://")):
        raise ingest_failed("only http and https URLs can be ingested")
    media = classify_media_url(url)
    if media is not None:
        return await _ingest_media_url(principal, url, media, title, in_kb, auto_transform)
    mine = await capture.captured(principal, url)  # a page the caller's browser captured is never fetched over
    if mine is not None:
        return mine
    canonical, shared = await _canonical_or_shared(principal, url, title, in_kb, auto_transform)
    if shared is not None:
        return shared
    try:
        page = await fetch_page(url)
    except UnsupportedMedia as exc:
        return await _ingest_media_url(principal, url, exc.kind, title, in_kb, auto_transform)
    return await _store_text(
        principal, kind="url", title=title or page.title, body=page.text,
        source=Source(filename="", url=url, canonical=canonical),
        metadata={**page.metadata, "final_url": page.url, "content_type": page.content_type},
        in_kb=in_kb, auto_transform=auto_transform,
    )


async def _ingest_media_url(principal: Principal, url: str, kind: str, title: str | None, in_kb: bool,
                            auto_transform: bool) -> Stored:
    """A YouTube, PDF, audio or video URL."""
    if kind == "youtube":
        return await _ingest_youtube(principal, url, title, in_kb, auto_transform)
    if kind in ("audio", "video") and get_transcriber() is None:
        raise transcription_unavailable()
    canonical, shared = await _canonical_or_shared(principal, url, title, in_kb, auto_transform)
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
                             in_kb: bool, auto_transform: bool) -> Stored:
    local, mime, final_url = await download(url, kind)
    store = runtime.get_object_store()
    try:
        filename = PurePosixPath(urlsplit(final_url).path).name or f"download{local.suffix}"
        klass = media_class(mime)
        if klass in ("audio", "video"):
            duration = await asyncio.to_thread(media_duration_seconds, local)
            async with transaction() as s:  # refuse before storing anything
                await quota.check(s, principal.user_id, principal.tier, duration)
        path = store.new_path(str(principal.user_id), filename)
        await store.put_file(path, local, mime)
        source = Source(filename=filename, path=path, mime=mime, size=local.stat().st_size, url=url,
                        canonical=canonical)
        try:
            if klass == "document":
                return await ingest_document(principal, source, local, title, in_kb=in_kb,
                                             auto_transform=auto_transform)
            return await ingest_media(principal, source, local, klass or "audio", title, in_kb=in_kb,
                                      auto_transform=auto_transform)
        except BaseException:
            async with transaction() as s:
                await upload_store.queue_deletion(s, [path])
            raise
    finally:
        local.unlink(missing_ok=True)


async def _ingest_youtube(principal: Principal, url: str, title: str | None, in_kb: bool,
                          auto_transform: bool) -> Stored:
    canonical = youtube.canonical_url(url)
    # yt-dlp does its own networking and cannot use the guarded transport: at least the YouTube host
    # itself must resolve to public addresses (the URL was already matched against YouTube's hosts).
    parts = urlsplit(url.strip())
    await check_host(parts.hostname or "www.youtube.com", parts.port or 443)
    shared = await _shared(principal, canonical, canonical, title, in_kb, auto_transform)
    if shared is not None:
        return shared
    info = await youtube.youtube_info(canonical)
    meta = {k: info.get(k) for k in ("id", "channel", "upload_date", "duration", "description")
            if info.get(k) is not None}
    doc_title = title or info.get("title") or canonical
    captions = await youtube.youtube_captions(info) if info.get("has_captions") else None
    source = Source(filename=info.get("id") or "video", url=canonical, canonical=canonical)
    duration = float(info["duration"]) if isinstance(info.get("duration"), (int, float)) else None
    if captions:
        meta["transcript_source"] = "captions"
        return await store_item(principal, source, kind="youtube", title=doc_title, text=None, metadata=meta,
                                status="ready", chunks=await prepare_timed(doc_title, captions), in_kb=in_kb,
                                auto_transform=auto_transform, transcription_status="done", duration=duration,
                                transcript="\n".join(c["text"] for c in captions))
    if get_transcriber() is None:
        raise transcription_unavailable()
    meta["transcript_source"] = "transcription"
    stored = await store_item(principal, source, kind="youtube", title=doc_title, text=None, metadata=meta,
                              status="processing", chunks=Chunks(), in_kb=in_kb, auto_transform=auto_transform,
                              transcription_status="pending", duration=duration, quota_seconds=duration or 0.0)
    if stored.new:
        await runtime.enqueue("transcribe_content", str(stored.content_id), str(principal.user_id))
    return stored
