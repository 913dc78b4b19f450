"""YouTube: the one list of its hosts and link forms, metadata and captions via yt-dlp, audio download.

yt-dlp is synchronous; every call runs in a worker thread. Captions are preferred over
transcription: `youtube_captions` fetches the best English track (json3 or WebVTT) and flattens it.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from lev.core import charsets
from lev.core.errors import ApiError, ingest_failed
from lev.plumbing import offload

_ID = re.compile(r"^[A-Za-z0-9_-]{11}$")
# Every host a YouTube video link may name; URL classification and canonical URLs both read these.
HOSTS = frozenset({"youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com", "youtube-nocookie.com",
                   "www.youtube-nocookie.com"})
SHORT_HOSTS = frozenset({"youtu.be", "www.youtu.be"})
PATH_PREFIXES = ("/shorts/", "/live/", "/embed/", "/v/")
_CAPTION_EXTS = ("json3", "vtt")


def _linked_id(url: str) -> str:
    """What a YouTube video link names as its video ('' when the URL is no such link)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https"):
        return ""
    host = (parts.hostname or "").lower()
    if host in SHORT_HOSTS:
        return parts.path.lstrip("/").split("/", 1)[0]
    if host in HOSTS:
        if parts.path.rstrip("/") == "/watch":
            return (parse_qs(parts.query).get("v") or [""])[0]
        for prefix in PATH_PREFIXES:
            if parts.path.startswith(prefix):
                return parts.path[len(prefix):].split("/", 1)[0]
    return ""


def is_youtube_link(url: str) -> bool:
    """True for a link in any YouTube video form (even one whose id is malformed): it goes to the YouTube path."""
    return bool(_linked_id(url))


def youtube_video_id(url: str) -> str | None:
    """The 11-character video id of a YouTube video URL, or None when the URL is not one."""
    candidate = _linked_id(url)
    return candidate if _ID.match(candidate) else None


def is_youtube(url: str) -> bool:
    """True for a YouTube video URL with a well-formed id (watch?v=, youtu.be/, /shorts/, /live/, /embed/, /v/ on
    any host in HOSTS)."""
    return youtube_video_id(url) is not None


def canonical_url(url: str) -> str:
    """`https://www.youtube.com/watch?v=<id>` for a YouTube video URL (drops playlist and tracking params)."""
    video_id = youtube_video_id(url)
    if video_id is None:
        raise ingest_failed("Not a YouTube video URL.")
    return f"https://www.youtube.com/watch?v={video_id}"


def _unavailable(exc: Exception) -> ApiError:
    message = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).removeprefix("ERROR: ").strip()
    return ingest_failed(f"YouTube video is unavailable (deleted or private): {message}")


def _caption_tracks(info: dict[str, Any]) -> list[dict[str, Any]]:
    """English caption tracks in preference order: manual before automatic, json3 before vtt."""
    tracks: list[tuple[tuple[int, int, int], dict[str, Any]]] = []
    for automatic, key in ((False, "subtitles"), (True, "automatic_captions")):
        for lang, formats in (info.get(key) or {}).items():
            if not (lang == "en" or lang.startswith(("en-", "en_"))) or not isinstance(formats, list):
                continue
            # Automatic "en" is YouTube's own recognition; "en-orig" likewise; translated tracks carry tlang.
            for fmt in formats:
                ext, url = fmt.get("ext"), fmt.get("url")
                if ext not in _CAPTION_EXTS or not url or (automatic and "tlang=" in url):
                    continue
                rank = (int(automatic), 0 if lang in ("en", "en-orig", "en-US", "en-GB") else 1,
                        _CAPTION_EXTS.index(ext))
                tracks.append((rank, {"lang": lang, "ext": ext, "url": url, "automatic": automatic}))
    tracks.sort(key=lambda t: t[0])
    return [t[1] for t in tracks]


def _extract(url: str, opts: dict[str, Any], download: bool) -> tuple[dict[str, Any], str | None]:
    import yt_dlp

    try:
        with yt_dlp.YoutubeDL(opts) as ydl:
            info = ydl.extract_info(url, download=download)
            path = None
            if download and info:
                downloads = info.get("requested_downloads") or []
                path = downloads[0].get("filepath") if downloads else ydl.prepare_filename(info)
    except yt_dlp.utils.YoutubeDLError as exc:
        raise _unavailable(exc) from None
    if not info:
        raise _unavailable(RuntimeError("no information returned"))
    return info, path


async def youtube_info(url: str) -> dict[str, Any]:
    """Title, duration, channel, upload date, description and available English caption tracks."""
    canonical = canonical_url(url)
    opts = {"skip_download": True, "quiet": True, "no_warnings": True, "noplaylist": True}
    info, _ = await asyncio.to_thread(_extract, canonical, opts, False)
    tracks = _caption_tracks(info)
    return {
        "id": info.get("id"),
        "url": canonical,
        "title": info.get("title"),
        "duration": info.get("duration"),
        "channel": info.get("channel") or info.get("uploader"),
        "upload_date": info.get("upload_date"),
        "description": info.get("description"),
        "has_captions": bool(tracks),
        "has_manual_captions": any(not t["automatic"] for t in tracks),
        "caption_tracks": tracks,
    }


MAX_CAPTION_BYTES = 20 * 1024 * 1024  # a caption file larger than this is not read
_TAG = re.compile(r"<[^<>]*>")  # a tag ends at the next < too: one pass, however many unclosed < a line holds
_CUE_TIME = re.compile(r"^\s*((?:\d+:)?\d{1,2}:\d{2}[.,]\d{1,3})\s+-->\s+((?:\d+:)?\d{1,2}:\d{2}[.,]\d{1,3})")


def _clean(line: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(_TAG.sub("", line))).strip()


def _timed(lines: list[tuple[float, float, str]]) -> list[dict[str, Any]]:
    """Cleaned caption lines as segments `{start, end, text}`; a line repeating the one before it (YouTube's
    rolling captions) is dropped, so each line is timed where it first appears."""
    out: list[dict[str, Any]] = []
    for start, end, raw in lines:
        line = _clean(raw)
        if line and (not out or out[-1]["text"] != line):
            out.append({"start": round(start, 3), "end": round(max(start, end), 3), "text": line})
    return out


def _vtt_seconds(stamp: str) -> float:
    parts = stamp.replace(",", ".").split(":")
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + float(part)
    return seconds


def vtt_segments(text: str) -> list[dict[str, Any]]:
    """The cue lines of a WebVTT file with their cue times: tags stripped, rolling repeats removed."""
    lines: list[tuple[float, float, str]] = []
    # cues end at an empty line; YouTube's rolling cues hold a line of one space, which is part of the cue
    blocks = re.split(r"\r?\n(?:\r?\n)+", text.replace("\ufeff", ""))
    for block in blocks:
        rows = [r for r in re.split(r"\r?\n", block) if r.strip()]
        if not rows:
            continue
        head = rows[0].strip()
        if head.startswith(("WEBVTT", "NOTE", "STYLE", "REGION")):
            continue
        timing = next((i for i, r in enumerate(rows) if "-->" in r), None)
        if timing is None:
            continue
        found = _CUE_TIME.match(rows[timing])
        if found is None:
            continue
        start, end = _vtt_seconds(found.group(1)), _vtt_seconds(found.group(2))
        lines.extend((start, end, row) for row in rows[timing + 1:])
    return _timed(lines)


def json3_segments(text: str) -> list[dict[str, Any]]:
    """The lines of a YouTube json3 caption file (events -> segs -> utf8) with their event times."""
    data = json.loads(text)
    lines: list[list[Any]] = []  # [start, end, text]
    for event in data.get("events") or []:
        chunk = "".join(str(s.get("utf8", "")) for s in event.get("segs") or [])
        if not chunk:
            continue
        start = float(event.get("tStartMs") or 0) / 1000
        end = start + float(event.get("dDurationMs") or 0) / 1000
        parts = chunk.split("\n")
        if event.get("aAppend") and lines:
            lines[-1][2] += parts[0]
            lines[-1][1] = max(lines[-1][1], end)
        else:
            lines.append([start, end, parts[0]])
        lines.extend([start, end, part] for part in parts[1:])
    return _timed([(a, b, t) for a, b, t in lines])


def caption_segments(body: bytes, charset: str | None, ext: str) -> list[dict[str, Any]]:
    """A caption file's timed lines (json3 or WebVTT, in its declared charset); [] when it cannot be read. A
    module-level function of picklable values: `youtube_captions` runs it off the event loop."""
    text = charsets.decode(body, charset)
    try:
        return json3_segments(text) if ext == "json3" else vtt_segments(text)
    except (ValueError, TypeError, AttributeError):
        return []


async def _caption_file(client: httpx.AsyncClient, url: str) -> tuple[bytes, str | None]:
    """The caption file's bytes (at most MAX_CAPTION_BYTES) and its declared charset."""
    async with client.stream("GET", url) as response:
        response.raise_for_status()
        body = bytearray()
        async for piece in response.aiter_bytes():
            body += piece
            if len(body) > MAX_CAPTION_BYTES:
                raise ValueError("the caption file is too large")
        return bytes(body), response.charset_encoding


async def youtube_captions(info: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The best English caption track listed by `youtube_info` as timed lines (`{start, end, text}`), or None
    when none is usable. Each file is read in a child process when it is large (a pathological one holds no
    request's event loop)."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0), follow_redirects=True) as client:
        for track in info.get("caption_tracks") or []:
            url = track["url"]
            if track["ext"] == "json3" and "fmt=" not in url:
                url += ("&" if "?" in url else "?") + "fmt=json3"
            try:
                body, charset = await _caption_file(client, url)
                segments = await offload.run(caption_segments, body, charset, track["ext"], size=len(body))
            except (httpx.HTTPError, ValueError, offload.OffloadFailed):
                continue
            if segments:
                return segments
    return None


async def youtube_audio(url: str, dest_dir: Path) -> Path:
    """Download the best audio-only stream of the video into `dest_dir`; returns the file path."""
    canonical = canonical_url(url)
    opts = {"format": "bestaudio/best", "quiet": True, "no_warnings": True, "noplaylist": True,
            "outtmpl": str(dest_dir / "%(id)s.%(ext)s"), "overwrites": True}

    def _download() -> Path:
        dest_dir.mkdir(parents=True, exist_ok=True)
        _, path = _extract(canonical, opts, True)
        if not path or not Path(path).is_file():
            raise _unavailable(RuntimeError("the audio download produced no file"))
        return Path(path)

    return await asyncio.to_thread(_download)
