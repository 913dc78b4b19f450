"""The document formats Lev reads itself, one seam for every way a file comes in (an upload, an e-mail's
attachment, a file of an imported folder, an inline text):

- `kind_for(filename, mime, head)`: the item kind a file becomes (`document`, `presentation`, `spreadsheet`,
  `ebook`, `markdown`, `html`, `email`, `text`; or `pdf`, `image`, `audio`, `video`), or None;
- `mime_for(filename)`: the MIME type a file of that name is uploaded and stored as;
- `read(mime, source, filename)`: its `Document` (normalised text, title, metadata, outline with headings, slides,
  sheets and rows, and the attachments of an e-mail), read in a bounded child process; `extract` is the same work
  in this process (what that child runs).

A file that cannot be read is refused in words: 422 extraction_failed (corrupt, truncated, encrypted, a ZIP bomb,
XML entity declarations, past the time or memory a reader may take) or 415 unsupported_media_type (its bytes are
something else).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path, PurePosixPath

from lev.core.errors import ApiError, extraction_failed
from lev.core.mimes import AUDIO_MIMES, DOCUMENT_MIMES, FORMAT_KINDS, FORMAT_TYPES, VIDEO_MIMES
from lev.ingest import ebook, mail, markup, sheets, slides, words
from lev.ingest.layout import Attachment, Document
from lev.ingest.media import EXT_MIME, normalize_mime, sniff_matches
from lev.plumbing import offload
from lev.store.lifecycle import RECORDINGS

__all__ = ["Attachment", "Document", "INLINE_KINDS", "KINDS", "extract", "kind_for", "mime_for", "read", "resolve"]

KINDS = FORMAT_KINDS  # document, presentation, spreadsheet, ebook, markdown, html, email, text
INLINE_KINDS = ("markdown", "html", "email", "spreadsheet")  # also as `text` through /ingest and add_to_knowledge
INLINE_MIMES = {"markdown": "text/markdown", "html": "text/html", "email": "message/rfc822",
                "spreadsheet": "text/csv"}
MAX_DOCUMENT_CHARS = 5_000_000  # of stored text (2,000 chunks index about 1.6 million); the rest is not kept
THREAD_MAX_BYTES = 64 * 1024  # a text format this small is read on a thread: a child's round trip costs more


_EXT: dict[str, tuple[str, str]] = {}  # extension -> (kind, MIME type)
_MIME_KIND: dict[str, str] = {}
for _kind, _mime, _exts in FORMAT_TYPES:
    _MIME_KIND[_mime] = _kind
    for _ext in _exts:
        _EXT[_ext] = (_kind, _mime)
for _ext, _mime in {**EXT_MIME, ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
                    ".webp": "image/webp", ".gif": "image/gif", ".tif": "image/tiff", ".tiff": "image/tiff"}.items():
    if _mime in DOCUMENT_MIMES:
        _EXT.setdefault(_ext, ("pdf" if _mime == "application/pdf" else "image", _mime))
    elif _mime in AUDIO_MIMES or _mime in VIDEO_MIMES:
        _EXT.setdefault(_ext, ("audio" if _mime in AUDIO_MIMES else "video", _mime))
_TEXT_KINDS = frozenset({"markdown", "html", "email", "text", "spreadsheet"})  # what text/plain may stand for
_TEXT_FORMS = frozenset({"text/markdown", "text/x-markdown", "text/html", "application/xhtml+xml", "message/rfc822",
                         "text/csv", "text/tab-separated-values"}) | {m for m, k in _MIME_KIND.items() if k == "text"}


def suffix(filename: str) -> str:
    return PurePosixPath((filename or "").replace("\\", "/")).suffix.lower()


def mime_for(filename: str) -> str | None:
    """The MIME type a file of this name is uploaded and stored as (by its extension), or None."""
    found = _EXT.get(suffix(filename))
    return found[1] if found else None


def resolve(filename: str, mime: str | None = None) -> tuple[str, str] | None:
    """(kind, the MIME type to read it as) of a file: by its MIME type, or by its extension when the type is generic
    (none, application/octet-stream, text/plain for a text format); None for what Lev does not take."""
    m = normalize_mime(mime or "")
    by_name = _EXT.get(suffix(filename))
    if m in ("", "application/octet-stream"):
        return by_name
    if m == "text/plain":
        return by_name if by_name and by_name[0] in _TEXT_KINDS else ("text", "text/plain")
    if m == "application/vnd.ms-excel":  # Windows' name for a .csv
        return ("spreadsheet", "text/csv") if suffix(filename) in ("", ".csv") else None
    if m in _MIME_KIND:
        return _MIME_KIND[m], m
    if m in DOCUMENT_MIMES:
        return ("pdf" if m == "application/pdf" else "image"), m
    if m in AUDIO_MIMES:
        return "audio", m
    if m in VIDEO_MIMES:
        return "video", m
    return None


def kind_for(filename: str, mime: str | None = None, head: bytes | None = None) -> str | None:
    """The item kind a file becomes, or None when Lev does not take it; with `head` (its first bytes, 1 KiB is
    plenty) also None when they are not of that type (`media.sniff_matches`)."""
    found = resolve(filename, mime)
    if found is None:
        return None
    if head is not None and not sniff_matches(found[1], head):
        return None
    return found[0]


def is_text_form(mime: str) -> bool:
    """A format that is text (Markdown, HTML, an e-mail, CSV, plain text): small ones are read on a thread."""
    return normalize_mime(mime) in _TEXT_FORMS


_READERS: dict[str, Callable[[bytes, str, str, int], Document]] = {
    mime: {"document": words.read, "presentation": slides.read, "spreadsheet": sheets.read, "ebook": ebook.read,
           "markdown": markup.read_markdown, "html": markup.read_html, "email": mail.read,
           "text": markup.read_text}[kind]
    for kind, mime, _ in FORMAT_TYPES
}


def extract(mime: str, source: bytes | str, filename: str = "", max_chars: int = MAX_DOCUMENT_CHARS) -> Document:
    """The document in `source` (its bytes, or the path of a local file) read as `mime` (one of the format types:
    `resolve` gives it), in this process (blocking). Its title falls back to the file name's stem; attachments of
    a type Lev does not read are left out (counted in `metadata.attachments_skipped`)."""
    m = normalize_mime(mime)
    reader = _READERS.get(m)
    if reader is None:
        raise extraction_failed(f"{m} is not a document format Lev reads.")
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    stem = PurePosixPath(filename.replace("\\", "/")).stem.strip() if filename else ""
    try:
        doc = reader(data, m, stem, max_chars)
    except RecursionError:  # e.g. an e-mail of 3,000 nested multiparts: the standard library's parser recurses
        raise extraction_failed("The file is nested too deeply to be read.") from None
    title = doc.title or stem or None
    kept, skipped = [], 0
    for a in doc.attachments:
        found = resolve(a.filename, a.mime)  # a recording would need the transcription quota: not taken
        if found is not None and found[0] not in RECORDINGS and sniff_matches(found[1], a.data[:1024]):
            kept.append(replace(a, mime=found[1]))
        else:
            skipped += 1
    metadata = {**doc.metadata, **({"attachments_skipped": skipped} if skipped else {})}
    return replace(doc, title=title, metadata=metadata, attachments=tuple(kept))


def time_bound(size_bytes: int) -> float:
    """How long reading a file of this size may take (a reader that runs longer is stopped)."""
    return min(30.0 + size_bytes / (1 << 20) * 6.0, 900.0)


async def read(mime: str, source: bytes | str, filename: str = "", *, seconds: float | None = None) -> Document:
    """`extract` in a bounded child process (memory capped, at most `seconds`, by default `time_bound` of its
    size); a small text format on a thread. 422 extraction_failed when the reader is stopped or dies."""
    size = len(source) if isinstance(source, bytes) else await asyncio.to_thread(os.path.getsize, source)
    if size <= THREAD_MAX_BYTES and is_text_form(mime):
        return await asyncio.to_thread(extract, mime, source, filename)
    bound = seconds if seconds is not None else time_bound(size)
    for _ in range(2):  # a child killed under this call (another call's overrun) gets one more try
        try:
            return await offload.run_bounded(extract, mime, source, filename, seconds=bound)
        except offload.OffloadTimeout:
            raise extraction_failed(f"Reading the file took longer than {bound:g} s and was stopped (a file this "
                                    "size should take far less: it may be built to be slow).") from None
        except offload.OffloadMemory:
            raise extraction_failed("Reading the file needed more memory than a reader may take (LEV_EXTRACT_MEMORY_"
                                    "MB); it was stopped.") from None
        except offload.OffloadFailed:
            continue
        except ApiError:
            raise
    raise extraction_failed("The file's reader stopped before it finished (twice).")
