"""The MIME types Lev accepts for an upload, by media class, and the document formats it reads itself (each an item
kind of its own, with its MIME types and file extensions): the contract (a 415 for any other, naming what is
accepted) and the ingest's upload policy (`lev.ingest.media`, `lev.ingest.formats`) read them here; the type a file
of a folder (a ZIP's member) is kept as, by its name."""

from __future__ import annotations

from pathlib import PurePosixPath

DOCUMENT_MIMES = frozenset({
    "application/pdf", "image/png", "image/jpeg", "image/webp", "image/gif", "image/tiff",
})
AUDIO_MIMES = frozenset({
    "audio/mpeg", "audio/mp4", "audio/x-m4a", "audio/m4a", "audio/wav", "audio/x-wav", "audio/wave",
    "audio/ogg", "audio/webm", "audio/flac", "audio/x-flac",
})
VIDEO_MIMES = frozenset({"video/mp4", "video/webm", "video/quicktime"})

# (item kind, MIME type, the file extensions that name it first). A kind's first row is its canonical type.
FORMAT_TYPES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("document", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", (".docx",)),
    ("document", "application/vnd.ms-word.document.macroenabled.12", (".docm",)),
    ("document", "application/vnd.oasis.opendocument.text", (".odt",)),
    ("document", "application/rtf", (".rtf",)),
    ("document", "text/rtf", ()),
    ("presentation", "application/vnd.openxmlformats-officedocument.presentationml.presentation", (".pptx",)),
    ("presentation", "application/vnd.ms-powerpoint.presentation.macroenabled.12", (".pptm",)),
    ("presentation", "application/vnd.oasis.opendocument.presentation", (".odp",)),
    ("spreadsheet", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", (".xlsx",)),
    ("spreadsheet", "application/vnd.ms-excel.sheet.macroenabled.12", (".xlsm",)),
    ("spreadsheet", "application/vnd.oasis.opendocument.spreadsheet", (".ods",)),
    ("spreadsheet", "text/csv", (".csv",)),
    ("spreadsheet", "text/tab-separated-values", (".tsv",)),
    ("spreadsheet", "application/vnd.ms-excel", ()),  # what Windows browsers call a .csv (the bytes must be text)
    ("ebook", "application/epub+zip", (".epub",)),
    ("markdown", "text/markdown", (".md", ".markdown")),
    ("markdown", "text/x-markdown", ()),
    ("html", "text/html", (".html", ".htm")),
    ("html", "application/xhtml+xml", (".xhtml",)),
    ("email", "message/rfc822", (".eml",)),
    ("text", "text/plain", (".txt", ".text", ".log", ".org", ".rst", ".tex")),
    ("text", "application/json", (".json",)),
    ("text", "application/x-ndjson", (".jsonl", ".ndjson")),
    ("text", "application/yaml", (".yaml", ".yml")),
    ("text", "application/x-yaml", ()),
    ("text", "text/yaml", ()),
    ("text", "application/toml", (".toml",)),
)
FORMAT_MIMES = frozenset(mime for _, mime, _ in FORMAT_TYPES)
FORMAT_KINDS = tuple(dict.fromkeys(kind for kind, _, _ in FORMAT_TYPES))  # document ... text, in this order

ALLOWED_MIMES = DOCUMENT_MIMES | AUDIO_MIMES | VIDEO_MIMES | FORMAT_MIMES

ACCEPTED = ("PDF (application/pdf); images (PNG, JPEG, WebP, GIF, TIFF); audio (MP3, M4A, WAV, Ogg, WebM, FLAC); "
            "video (MP4, WebM, QuickTime); Word and other documents (.docx, .docm, .odt, .rtf); presentations "
            "(.pptx, .pptm, .odp); spreadsheets (.xlsx, .xlsm, .ods, .csv, .tsv); e-books (.epub); Markdown (.md, "
            ".markdown); saved web pages (.html, .htm); e-mails (.eml); plain text (.txt, .log, .json, .yaml, "
            ".toml and similar)")


def not_accepted(mime: str) -> str:
    """The 415 message for a MIME type outside the allowlist: what is accepted instead."""
    return (f"MIME type {mime[:200]!r} is not accepted (lower case, without parameters). Lev accepts: {ACCEPTED}. "
            "GET /api/v1/openapi.json lists every MIME type (UploadMime).")


# File names' extensions -> the MIME type of a file of a folder (a ZIP's member: its name is all it says), read
# without importing the readers (a ZIP's directory is read in a child process that should start quickly);
# lev.ingest.formats.mime_for answers the same (tests/imports/test_archive_reader.py compares them).
_MEDIA_NAMES = {
    ".pdf": "application/pdf", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
    ".webp": "image/webp", ".gif": "image/gif", ".tif": "image/tiff", ".tiff": "image/tiff",
    ".mp3": "audio/mpeg", ".m4a": "audio/mp4", ".wav": "audio/wav", ".ogg": "audio/ogg", ".opus": "audio/ogg",
    ".flac": "audio/flac", ".mp4": "video/mp4", ".webm": "video/webm", ".mkv": "video/webm",
    ".mov": "video/quicktime",
}
NAME_MIME = {**{ext: mime for _, mime, exts in FORMAT_TYPES for ext in exts}, **_MEDIA_NAMES}


def mime_for_name(name: str) -> str | None:
    """The MIME type a file of this name is kept as (by its extension), or None when Lev keeps no such file."""
    mime = NAME_MIME.get(PurePosixPath(name.replace("\\", "/")).suffix.lower())
    return mime if mime in ALLOWED_MIMES else None
