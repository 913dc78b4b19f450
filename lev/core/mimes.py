"""The MIME types Lev accepts for an upload, by media class: the contract (a 415 for any other) and the ingest's
upload policy (`lev.ingest.media`) read them here."""

from __future__ import annotations

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
