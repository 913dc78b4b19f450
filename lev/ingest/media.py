"""Upload MIME policy: the allowlist, size cap, magic-byte sniffing and media duration.

Every upload passes `check_signing` when the signed URL is issued and `sniff_matches` on the stored
bytes at finalize (DESIGN.md §5: MIME allowlist, magic bytes must match, size checked twice).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Literal
from urllib.parse import urlsplit

import enzyme
import filetype

from lev.core.errors import extraction_failed, file_too_large, invalid_body, unsupported_media_type
from lev.core.mimes import ALLOWED_MIMES, AUDIO_MIMES, DOCUMENT_MIMES, FORMAT_MIMES, VIDEO_MIMES, not_accepted

MAX_UPLOAD_BYTES = 52428800  # every MIME type; openapi.yaml's UploadSize maximum (a test holds them together)

MediaClass = Literal["document", "audio", "video"]

# How many leading bytes callers read for `sniff_matches` (PDFs may lead with junk).
SNIFF_HEAD = 1024

# File extensions of media URLs and yt-dlp downloads -> the MIME type to store them under.
EXT_MIME = {
    ".pdf": "application/pdf", ".mp3": "audio/mpeg", ".m4a": "audio/mp4", ".wav": "audio/wav",
    ".ogg": "audio/ogg", ".opus": "audio/ogg", ".flac": "audio/flac", ".mp4": "video/mp4",
    ".webm": "video/webm", ".mov": "video/quicktime", ".mkv": "video/webm",
}

_MP3_SYNC = re.compile(rb"\xff[\xe2-\xe3\xf2-\xf3\xfa-\xfb]")


def normalize_mime(mime: str) -> str:
    """Lower-case the MIME type and drop parameters (`audio/ogg; codecs=opus` -> `audio/ogg`)."""
    return mime.split(";", 1)[0].strip().lower()


def media_class(mime: str) -> MediaClass | None:
    """Which pipeline handles this MIME type, or None when it is not allowed."""
    m = normalize_mime(mime)
    if m in DOCUMENT_MIMES or m in FORMAT_MIMES:
        return "document"
    if m in AUDIO_MIMES:
        return "audio"
    if m in VIDEO_MIMES:
        return "video"
    return None


def finalize_endpoint(mime: str) -> Literal["finalize", "finalize-document"]:
    """The finalize route the client must call after the byte upload."""
    return "finalize-document" if media_class(mime) == "document" else "finalize"


def pick_mime(ctype: str, url: str, kind: str) -> str:
    """The MIME type of a downloaded media file: the served type when it fits `kind`, else by extension."""
    klass = media_class(ctype) if ctype else None
    if klass is not None and (klass == "document") == (kind == "pdf"):
        return ctype
    guess = EXT_MIME.get(PurePosixPath(urlsplit(url).path).suffix.lower())
    if guess:
        return guess
    return {"pdf": "application/pdf", "audio": "audio/mpeg", "video": "video/mp4"}.get(kind, ctype)


def read_head(path: Path, n: int = SNIFF_HEAD) -> bytes:
    """The first `n` bytes of a local file (blocking)."""
    with path.open("rb") as fh:
        return fh.read(n)


def check_signing(mime: str, size: int) -> None:
    """Refuse a signed-URL request whose size or MIME type the service will not accept."""
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise invalid_body("size must be a positive integer (bytes).")
    if size > MAX_UPLOAD_BYTES:  # the schema's maximum, refused as the contract's validation refuses it
        raise file_too_large(f"size: uploads are limited to {MAX_UPLOAD_BYTES} bytes (50 MB).", MAX_UPLOAD_BYTES)
    if media_class(mime) is None:
        raise unsupported_media_type(not_accepted(mime))


# ISO-BMFF brands of still-image formats (HEIF/HEIC, AVIF, JPEG 2000, Canon raw): not audio or video.
_IMAGE_BRANDS = frozenset({b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"hevm", b"hevs", b"mif1",
                           b"msf1", b"avif", b"avis", b"jp2 ", b"jpx ", b"jpm ", b"crx "})


def _ftyp_brand(head: bytes) -> bytes | None:
    if len(head) >= 12 and head[4:8] == b"ftyp" and head[8:12] not in _IMAGE_BRANDS:
        return head[8:12]
    return None


def _is_mp3(head: bytes) -> bool:
    if head.startswith(b"ID3"):
        return True
    return len(head) >= 2 and _MP3_SYNC.match(head[:2]) is not None


def _is_riff(head: bytes, form: bytes) -> bool:
    return len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == form


_CHECKS = {
    "application/pdf": lambda h: h[:1024].lstrip(b"\x00\t\r\n\x0c ").startswith(b"%PDF-"),
    "image/png": lambda h: h.startswith(b"\x89PNG\r\n\x1a\n"),
    "image/jpeg": lambda h: h.startswith(b"\xff\xd8\xff"),
    "image/gif": lambda h: h.startswith((b"GIF87a", b"GIF89a")),
    "image/webp": lambda h: _is_riff(h, b"WEBP"),
    "image/tiff": lambda h: h.startswith((b"II*\x00", b"MM\x00*")),
    "wav": lambda h: _is_riff(h, b"WAVE"),
    "audio/mpeg": _is_mp3,
    "audio/ogg": lambda h: h.startswith(b"OggS"),
    "flac": lambda h: h.startswith(b"fLaC"),
    "ebml": lambda h: h.startswith(b"\x1a\x45\xdf\xa3"),
    "isobmff": lambda h: _ftyp_brand(h) is not None,
    "quicktime": lambda h: _ftyp_brand(h) == b"qt  " or h[4:8] in (b"moov", b"mdat", b"wide", b"free"),
}

_RULE = {
    "audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav",
    "audio/flac": "flac", "audio/x-flac": "flac",
    "audio/webm": "ebml", "video/webm": "ebml",
    "audio/mp4": "isobmff", "audio/x-m4a": "isobmff", "audio/m4a": "isobmff", "video/mp4": "isobmff",
    "video/quicktime": "quicktime",
}


ZIP_MAGIC = b"PK\x03\x04"
OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # the compound file of old Office files and encrypted new ones
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def is_text(head: bytes) -> bool:
    """The leading bytes of a text file: UTF-16 with its byte-order mark, or no NUL and no known binary signature
    (the reader decodes UTF-8, a declared charset, else Windows-1252)."""
    if head.startswith(_UTF16_BOMS):
        return True
    if b"\x00" in head or head.startswith((ZIP_MAGIC, OLE2_MAGIC, b"%PDF-", b"{\\rtf")):
        return False
    return filetype.guess(head) is None


# The format MIME types by how their bytes start: ZIP containers (OOXML also as an encrypted OLE2 package, which
# the reader refuses in words), RTF, and text.
_OOXML = frozenset(m for m in FORMAT_MIMES if "openxmlformats" in m or "macroenabled" in m)
_ZIPPED = _OOXML | {"application/vnd.oasis.opendocument.text", "application/vnd.oasis.opendocument.presentation",
                    "application/vnd.oasis.opendocument.spreadsheet", "application/epub+zip"}
_RTF = frozenset({"application/rtf", "text/rtf"})


def _format_sniff(m: str, head: bytes) -> bool:
    if m in _ZIPPED:
        return head.startswith(ZIP_MAGIC) or (m in _OOXML and head.startswith(OLE2_MAGIC))
    if m in _RTF:
        return head.lstrip().startswith(b"{\\rtf")
    if m == "application/vnd.ms-excel":  # a .csv as Windows names it; an old binary .xls is refused in words
        return is_text(head) or head.startswith(OLE2_MAGIC)
    return is_text(head)


def sniff_matches(mime: str, head: bytes) -> bool:
    """True when the leading bytes are of the declared (allowed) MIME type.

    Explicit signatures decide; the `filetype` library is consulted only as a cross-check that the
    bytes are not recognisably something else (an executable, an archive) for the ISO-BMFF family,
    whose brands vary widely.
    """
    m = normalize_mime(mime)
    if m not in ALLOWED_MIMES:
        return False
    if m in FORMAT_MIMES:
        return _format_sniff(m, head)
    rule = _RULE.get(m, m)
    if rule == "quicktime" and _ftyp_brand(head) is not None:
        # Many .mov files carry an ISO brand; any ftyp box is acceptable for QuickTime.
        rule = "isobmff"
    if not _CHECKS[rule](head):
        return False
    if rule in ("isobmff", "quicktime"):
        kind = filetype.guess(head)
        if kind is not None and not kind.mime.startswith(("video/", "audio/")):
            return False
    return True


def _matroska_duration(path: Path) -> float | None:
    """The duration a WebM or Matroska file declares in its header (enzyme); None when it has none."""
    try:
        with path.open("rb") as f:
            duration = enzyme.MKV(f).info.duration
    except Exception:  # enzyme raises its own types (and struct's) on what is not Matroska
        return None
    return duration.total_seconds() if duration is not None else None


def media_duration_seconds(path: Path | str) -> float:
    """Duration of an audio or video file in seconds: mutagen (MP3, MP4/M4A/MOV, Ogg, FLAC, WAV), then enzyme for
    the WebM and Matroska files mutagen does not read. No ffmpeg is shipped for this: it was 165 MiB of the install."""
    p = Path(path)
    duration: float | None = None
    try:
        import mutagen

        info = mutagen.File(p)
        length = getattr(getattr(info, "info", None), "length", None)
        if length and length > 0:
            duration = float(length)
    except Exception:  # mutagen raises many unrelated types on odd files
        duration = None
    if duration is None:
        duration = _matroska_duration(p)
    if duration is None or duration <= 0:
        raise extraction_failed("Could not read the media duration (corrupt file?).")
    return duration
