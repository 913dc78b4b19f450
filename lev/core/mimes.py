"""The MIME types Lev accepts for an upload, by media class: the contract (a 415 for any other) and the ingest's
upload policy (`lev.ingest.media`) read them here; and the type a file of a folder (a ZIP's member) is kept as, by
its name."""

from __future__ import annotations

from pathlib import PurePosixPath

DOCUMENT_MIMES = frozenset({
    "application/pdf", "image/png", "image/jpeg", "image/webp", "image/gif", "image/tiff",
    "text/plain", "text/markdown",  # UTF-8 text: kept as kind text (issue 48's formats give them kinds of their own)
})
AUDIO_MIMES = frozenset({
    "audio/mpeg", "audio/mp4", "audio/x-m4a", "audio/m4a", "audio/wav", "audio/x-wav", "audio/wave",
    "audio/ogg", "audio/webm", "audio/flac", "audio/x-flac",
})
VIDEO_MIMES = frozenset({"video/mp4", "video/webm", "video/quicktime"})
ALLOWED_MIMES = DOCUMENT_MIMES | AUDIO_MIMES | VIDEO_MIMES

# File names' extensions -> the MIME type a file of a folder is kept as (a ZIP's member: its name is all it has).
NAME_MIME = {
    ".pdf": "application/pdf", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
    ".webp": "image/webp", ".gif": "image/gif", ".tif": "image/tiff", ".tiff": "image/tiff",
    ".mp3": "audio/mpeg", ".m4a": "audio/mp4", ".wav": "audio/wav", ".ogg": "audio/ogg", ".opus": "audio/ogg",
    ".flac": "audio/flac", ".mp4": "video/mp4", ".m4v": "video/mp4", ".webm": "video/webm", ".mkv": "video/webm",
    ".mov": "video/quicktime", ".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
}


def mime_for_name(name: str) -> str | None:
    """The MIME type Lev keeps a file of this name as (by its extension), or None when it keeps no such file."""
    mime = NAME_MIME.get(PurePosixPath(name).suffix.lower())
    return mime if mime in ALLOWED_MIMES else None
