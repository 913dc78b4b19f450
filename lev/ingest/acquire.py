"""The acquire step: the text, file or recording a resolved request stands for, as a tagged result.

A snippet is its own text; a web page is fetched and read by trafilatura; a PDF, audio or video link is
downloaded through the SSRF guard into the object store; YouTube comes through yt-dlp (captions when it has
them, else a recording to transcribe). An uploaded file (finalize) is read from the object store by `file`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from lev.core.errors import ApiError, ingest_failed, transcription_unavailable
from lev.ingest import formats, youtube
from lev.ingest.documents import INLINE_OCR_PAGES, extract, pdf_plan
from lev.ingest.download import download
from lev.ingest.media import media_class, media_duration_seconds
from lev.ingest.request import Resolved
from lev.ingest.webpage import UnsupportedMedia, fetch_page, read_html
from lev.limits import quota
from lev.plumbing.deps import Deps
from lev.store import lifecycle
from lev.store import uploads as upload_store
from lev.store.locations import Outline

INLINE_DOC_BYTES = 20 * 1024 * 1024  # documents larger than this are finished by the worker
INLINE_FORMAT_BYTES = 4 * 1024 * 1024  # an Office file, e-book or text format larger than this: read by the worker


@dataclass(frozen=True)
class Source:
    """Where the bytes came from: the object path (an upload, or a file Lev downloaded) and, for URL ingest, the
    URL and its canonical form."""

    filename: str
    path: str | None = None
    mime: str | None = None
    size: int | None = None
    url: str | None = None
    canonical: str | None = None  # the key a fetched URL's content is shared by
    owner_url: str | None = None  # a page captured in the user's browser: the key it is the user's own by
    attached_to: str | None = None  # an e-mail's attachment Lev stored: the message's item
    page: bytes | None = None  # a web page's HTML as fetched or captured: its archived copy is made from it
    charset: str | None = None  # the page's, as its server named it

    @property
    def upload(self) -> bool:
        """An object the client uploaded itself (finalize), as opposed to one Lev downloaded or took out of an
        e-mail."""
        return self.url is None and self.path is not None and self.attached_to is None


@dataclass(frozen=True)
class Text:
    """Readable text now: a snippet, a page, a document extracted in the request."""

    kind: str
    title: str | None
    body: str
    source: Source
    metadata: dict[str, Any] = field(default_factory=dict)
    headings: tuple[str, ...] = ()  # a page's section headings, in order (found as lines of its text)
    outline: Outline | None = None  # a PDF's page starts in `body`; a document's own structure
    attachments: tuple[formats.Attachment, ...] = ()  # an e-mail's, each to become an item of its own


@dataclass(frozen=True)
class Unread:
    """A document left for the worker to read (OCR on many pages, or a large file)."""

    kind: str
    title: str | None
    source: Source
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Captions:
    """A YouTube video's captions, as timed segments."""

    title: str | None
    segments: list[dict[str, Any]]
    source: Source
    duration: float | None
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: str = "youtube"


@dataclass(frozen=True)
class Recording:
    """Audio, video or a YouTube video without captions: transcribed by the worker."""

    kind: str
    title: str | None
    source: Source
    duration: float | None
    metadata: dict[str, Any] = field(default_factory=dict)


Acquired = Text | Unread | Captions | Recording


def title_from_text(text: str, limit: int = 80) -> str:
    """A snippet's title when none is given: its first line, cut at a word boundary."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) <= limit:
        return first
    cut = first[:limit].rsplit(" ", 1)[0]
    return (cut or first[:limit]) + "…"


async def acquire(deps: Deps, r: Resolved) -> Acquired:
    """What `r` stands for; 400 ingest_failed (with why) when a page or file cannot be had."""
    if r.kind == "text":
        assert r.text is not None
        meta: dict[str, Any] = {} if r.title else {"title_from_text": True}
        if r.source_url is not None:  # a selection saved from a page keeps where it came from
            meta["source_url"] = r.source_url
        return Text("text", r.title or title_from_text(r.text), r.text, Source(filename=""), meta)
    if r.kind in formats.INLINE_KINDS:
        return await _inline(r)
    assert r.url is not None and r.canonical is not None
    if r.kind == "page":
        return await _captured(r)
    if r.kind == "youtube":
        return await _youtube(deps, r.url)
    if r.kind != "url":
        return await _downloaded(deps, r, r.kind)
    try:
        page = await fetch_page(deps.outbound, r.url)
    except UnsupportedMedia as exc:  # the link said page, the server said PDF, audio or video
        if exc.kind in lifecycle.RECORDINGS and deps.transcriber is None:
            raise transcription_unavailable() from None
        return await _downloaded(deps, r, exc.kind)
    source = Source(filename="", url=r.url, canonical=r.canonical, page=page.html, charset=page.charset)
    return Text("url", page.title, page.text, source,
                {**page.metadata, "final_url": page.url, "content_type": page.content_type}, headings=page.headings)


async def _inline(r: Resolved) -> Text:
    """A text format sent as text (Markdown, HTML, an e-mail, CSV): read as its file would be."""
    assert r.text is not None
    try:
        doc = await formats.read(formats.INLINE_MIMES[r.kind], r.text.encode("utf-8"))
    except ApiError as exc:
        if exc.code == "extraction_failed":  # /ingest answers the spec's descriptive 400, as for a file by URL
            raise ingest_failed(f"the {r.kind} text could not be read: {exc.message}") from None
        raise
    title = r.title or doc.title or title_from_text(doc.text or r.text)
    meta = {**doc.metadata, **({} if r.title or doc.title else {"title_from_text": True})}
    return Text(r.kind, title, doc.text, Source(filename=""), meta, outline=doc.outline, attachments=doc.attachments)


async def _captured(r: Resolved) -> Text:
    """A page as the user's browser rendered it, read exactly as a fetched page is (trafilatura), from the HTML
    sent (its URL is not fetched). 400 ingest_failed when it has no readable text."""
    assert r.html is not None and r.url is not None
    page = await read_html(r.html, r.url)
    if not page.text:
        raise ingest_failed("the page has no readable text to store")
    metadata: dict[str, Any] = {**page.metadata, "captured": r.captured, "content_type": "text/html"}
    return Text("url", r.title or page.title or r.url, page.text,
                Source(filename="", url=r.url, owner_url=r.canonical, page=r.html, charset="utf-8"), metadata,
                headings=page.headings)


async def _downloaded(deps: Deps, r: Resolved, kind: str) -> Acquired:
    """A PDF, audio or video link: downloaded, checked against the quota, put in the object store, then read as
    a file (its object is queued for deletion if anything after the put fails)."""
    assert r.url is not None
    local, mime, final_url = await download(deps.outbound, r.url, kind)
    try:
        filename = PurePosixPath(urlsplit(final_url).path).name or f"download{local.suffix}"
        if media_class(mime) in lifecycle.RECORDINGS:
            duration = await asyncio.to_thread(media_duration_seconds, local)
            async with deps.db.read_session() as s:  # refuse before storing anything
                await quota.check(s, deps.settings, r.principal.user_id, r.principal.tier, duration)
        path = deps.objects.new_path(str(r.principal.user_id), filename)
        await deps.objects.put_file(path, local, mime)
        source = Source(filename=filename, path=path, mime=mime, size=local.stat().st_size, url=r.url,
                        canonical=r.canonical)
        try:
            return await file(deps, source, local, None)
        except ApiError as exc:
            await _forget_object(deps, path)
            if exc.code == "extraction_failed":  # /ingest answers the spec's descriptive 400 for unreadable files
                what = "PDF" if kind == "pdf" else f"{kind} file"
                raise ingest_failed(f"the {what} at this URL could not be read: {exc.message}") from None
            raise
        except BaseException:
            await _forget_object(deps, path)
            raise
    finally:
        local.unlink(missing_ok=True)


async def _forget_object(deps: Deps, path: str) -> None:
    async with deps.db.transaction() as s:
        await upload_store.queue_deletion(s, [path])


async def file(deps: Deps, source: Source, local: Path, title: str | None) -> Acquired:
    """A document or recording from a local copy of a stored object: a PDF or image is read now unless it needs
    OCR on more than `INLINE_OCR_PAGES` pages or is larger than `INLINE_DOC_BYTES`; audio and video have their
    duration read. 422 extraction_failed / 400 for a file that cannot be read."""
    mime = source.mime or "application/pdf"
    meta: dict[str, Any] = {"filename": source.filename}
    if source.url:
        meta["source_url"] = source.url
    klass = media_class(mime)
    if klass in lifecycle.RECORDINGS:
        duration = await asyncio.to_thread(media_duration_seconds, local)
        meta["duration_sec"] = round(duration, 3)
        return Recording(klass, title or source.filename, source, duration, meta)
    found = formats.resolve(source.filename, mime)
    if found is not None and found[0] in formats.KINDS:
        return await _document(source, local, title, found, meta)
    kind = "pdf" if mime == "application/pdf" else "image"
    queued = (source.size or 0) > INLINE_DOC_BYTES
    if kind == "pdf":
        _pages, textless = await asyncio.to_thread(pdf_plan, local)  # a corrupt PDF is refused now
        queued = queued or textless > INLINE_OCR_PAGES
    if queued:
        return Unread(kind, title or source.filename, source, meta)
    doc = await asyncio.to_thread(extract, local, mime)
    meta = {**doc.metadata, **meta}
    return Text(kind, title or doc.metadata.get("title") or source.filename, doc.text, source, meta,
                outline=doc.outline)


async def _document(source: Source, local: Path, title: str | None, found: tuple[str, str],
                    meta: dict[str, Any]) -> Acquired:
    """An Office file, e-book, Markdown note, saved page, e-mail or text file, read now (in a bounded child) unless
    it is larger than INLINE_FORMAT_BYTES (an e-mail always now: its attachments become items in this request)."""
    kind, mime = found
    if kind != "email" and (source.size or 0) > INLINE_FORMAT_BYTES:
        return Unread(kind, title or source.filename, source, {**meta, **({} if title else {"title_from_file": True})})
    doc = await formats.read(mime, str(local), source.filename)
    return Text(kind, title or doc.title or source.filename, doc.text, source, {**doc.metadata, **meta},
                outline=doc.outline, attachments=doc.attachments)


async def _youtube(deps: Deps, canonical: str) -> Acquired:
    info = await youtube.youtube_info(canonical)
    meta = {k: info.get(k) for k in ("id", "channel", "upload_date", "duration", "description")
            if info.get(k) is not None}
    doc_title = info.get("title") or canonical  # a title the user gives is their item's (lev.ingest.save)
    source = Source(filename=info.get("id") or "video", url=canonical, canonical=canonical)
    duration = float(info["duration"]) if isinstance(info.get("duration"), (int, float)) else None
    captions = await youtube.youtube_captions(info) if info.get("has_captions") else None
    if captions:
        return Captions(doc_title, captions, source, duration, {**meta, "transcript_source": "captions"})
    if deps.transcriber is None:
        raise transcription_unavailable()
    return Recording("youtube", doc_title, source, duration, {**meta, "transcript_source": "transcription"})
