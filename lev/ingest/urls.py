"""What a URL is to ingest: its canonical form (the key content is shared by) and the media kind its link says."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from lev.ingest import youtube

MEDIA_EXTENSIONS: dict[str, str] = {
    ".pdf": "pdf",
    **dict.fromkeys((".mp3", ".m4a", ".wav", ".ogg", ".flac", ".opus"), "audio"),
    **dict.fromkeys((".mp4", ".webm", ".mov", ".mkv"), "video"),
}

def canonical_url(url: str) -> str:
    """The URL used to share content records: no fragment, no utm_* params, no default port."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is not None and not ((scheme == "http" and port == 80) or (scheme == "https" and port == 443)):
        host = f"{host}:{port}"
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    netloc = f"{userinfo}@{host}" if userinfo else host
    # filter the raw "k=v" pairs so the kept ones stay byte-for-byte as they were
    query = "&".join(
        pair for pair in parts.query.split("&")
        if pair and not pair.split("=", 1)[0].lower().startswith("utm_")
    )
    return urlunsplit((scheme, netloc, parts.path or "/", query, ""))


def classify_media_url(url: str) -> str | None:
    """'youtube', 'pdf', 'audio' or 'video' when the URL itself says so, else None."""
    if youtube.is_youtube_link(url):
        return "youtube"
    path = urlsplit(url.strip()).path
    dot = path.rfind(".")
    if dot > path.rfind("/"):
        return MEDIA_EXTENSIONS.get(path[dot:].lower())
    return None
