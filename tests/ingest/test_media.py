"""Upload MIME policy: allowlist, size cap, magic-byte sniffing and media duration on generated files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lev.core.errors import ApiError, rest_body
from lev.core.mimes import FORMAT_MIMES
from lev.ingest.media import (
    ALLOWED_MIMES,
    MAX_UPLOAD_BYTES,
    check_signing,
    finalize_endpoint,
    media_class,
    media_duration_seconds,
    sniff_matches,
)
from lev.ingest.youtube import _caption_tracks, canonical_url, is_youtube, json3_segments, vtt_segments

try:
    from tests import fixtures_media as fm
except ImportError:  # tests/ is not a package: pytest puts it on sys.path
    import fixtures_media as fm  # type: ignore[no-redef]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("media")
    out = fm.make_all(d)
    img = fm.text_image(["x"], size=20, width=60)
    for fmt, name in (("JPEG", "jpg"), ("GIF", "gif"), ("WEBP", "webp"), ("TIFF", "tiff")):
        img.save(d / f"img.{name}", format=fmt)
        out[name] = d / f"img.{name}"
    fm._ffmpeg("-f", "lavfi", "-i", "sine=duration=1", "-c:a", "flac", str(d / "a.flac"))
    fm._ffmpeg("-f", "lavfi", "-i", "sine=duration=1", "-c:a", "libvorbis", str(d / "a.ogg"))
    fm._ffmpeg("-f", "lavfi", "-i", "sine=duration=1", "-c:a", "aac", str(d / "a.m4a"))
    video = ["-f", "lavfi", "-i", "testsrc=duration=1:size=64x48:rate=5"]
    fm._ffmpeg(*video, "-c:v", "mpeg4", str(d / "v.mov"))
    fm._ffmpeg(*video, "-c:v", "libvpx", str(d / "v.webm"))
    for name in ("flac", "ogg", "m4a", "mov", "webm"):
        out[name] = next(d.glob(f"*.{name}"))
    return out


def head(path: Path) -> bytes:
    return path.read_bytes()[:64]


def test_size_cap_is_inclusive() -> None:
    check_signing("application/pdf", MAX_UPLOAD_BYTES)
    with pytest.raises(ApiError) as exc:
        check_signing("application/pdf", MAX_UPLOAD_BYTES + 1)
    assert exc.value.status == 413  # the interface spec's code; the schema's maximum 52428800 says the same cap
    assert rest_body(exc.value)["error"] == "file_too_large"
    assert rest_body(exc.value)["maxBytes"] == 52428800


@pytest.mark.parametrize("mime", ["application/zip", "application/x-sh", "image/svg+xml", "application/x-msdownload",
                                  "", "image/heic"])
def test_mime_outside_allowlist_is_415(mime: str) -> None:
    with pytest.raises(ApiError) as exc:
        check_signing(mime, 1000)
    assert (exc.value.status, exc.value.code) == (415, "unsupported_media_type")


@pytest.mark.parametrize("size", [0, -1])
def test_non_positive_size_is_invalid_body(size: int) -> None:
    with pytest.raises(ApiError) as exc:
        check_signing("image/png", size)
    assert (exc.value.status, exc.value.code) == (400, "invalid_body")


def test_classes_and_finalize_endpoints() -> None:
    assert media_class("application/pdf") == "document"
    assert media_class("image/webp") == "document"
    assert media_class("audio/x-m4a") == "audio"
    assert media_class("Audio/Ogg; codecs=opus") == "audio"
    assert media_class("video/quicktime") == "video"
    assert media_class("text/plain") == "document"  # a text file, read by lev.ingest.formats
    assert media_class("application/vnd.openxmlformats-officedocument.wordprocessingml.document") == "document"
    assert media_class("application/zip") is None
    assert finalize_endpoint("text/markdown") == "finalize-document"
    assert finalize_endpoint("image/png") == "finalize-document"
    assert finalize_endpoint("application/pdf") == "finalize-document"
    assert finalize_endpoint("audio/mpeg") == "finalize"
    assert finalize_endpoint("video/mp4") == "finalize"
    assert len(ALLOWED_MIMES) == 20 + len(FORMAT_MIMES) == 47


SNIFF_CASES = [
    ("text_pdf", "application/pdf"), ("corrupt_pdf", "application/pdf"), ("png", "image/png"),
    ("jpg", "image/jpeg"), ("gif", "image/gif"), ("webp", "image/webp"), ("tiff", "image/tiff"),
    ("wav", "audio/wav"), ("wav", "audio/x-wav"), ("wav", "audio/wave"), ("mp3", "audio/mpeg"),
    ("ogg", "audio/ogg"), ("flac", "audio/flac"), ("flac", "audio/x-flac"), ("m4a", "audio/mp4"),
    ("m4a", "audio/x-m4a"), ("m4a", "audio/m4a"), ("mp4", "video/mp4"), ("mov", "video/quicktime"),
    ("webm", "video/webm"), ("webm", "audio/webm"),
]


@pytest.mark.parametrize(("name", "mime"), SNIFF_CASES)
def test_sniff_accepts_real_files(files: dict[str, Path], name: str, mime: str) -> None:
    assert sniff_matches(mime, head(files[name]))


@pytest.mark.parametrize(("name", "mime"), [
    ("exe", "image/png"), ("exe", "application/pdf"), ("exe", "video/mp4"), ("png", "application/pdf"),
    ("jpg", "image/png"), ("wav", "image/webp"), ("mp3", "audio/wav"), ("text_pdf", "audio/mpeg"),
    ("mp4", "video/webm"), ("webm", "video/mp4"), ("png", "text/plain"),
])
def test_sniff_refuses_mismatches(files: dict[str, Path], name: str, mime: str) -> None:
    assert not sniff_matches(mime, head(files[name]))


def test_sniff_refuses_empty_and_short_heads() -> None:
    assert not sniff_matches("image/png", b"")
    assert not sniff_matches("audio/mpeg", b"\xff")
    heif = b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00"  # a HEIF still image, not video
    assert not sniff_matches("video/mp4", heif)


@pytest.mark.parametrize(("name", "expected"), [("wav", 2.0), ("mp3", 1.0), ("mp4", 1.0), ("webm", 1.0)])
def test_durations(files: dict[str, Path], name: str, expected: float) -> None:
    assert media_duration_seconds(files[name]) == pytest.approx(expected, abs=0.1)


def test_duration_of_garbage_is_extraction_failed(files: dict[str, Path]) -> None:
    with pytest.raises(ApiError) as exc:
        media_duration_seconds(files["exe"])
    assert (exc.value.status, exc.value.code) == (422, "extraction_failed")


# --- YouTube helpers (no network here: URL classification and caption parsers only) ---


@pytest.mark.parametrize("url", [
    "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
    "https://youtube.com/watch?v=dQw4w9WgXcQ&list=PL123&t=42s",
    "http://m.youtube.com/watch?feature=share&v=dQw4w9WgXcQ",
    "https://music.youtube.com/watch?v=dQw4w9WgXcQ",
    "https://youtu.be/dQw4w9WgXcQ?si=abc",
    "https://www.youtube.com/shorts/dQw4w9WgXcQ",
    "https://www.youtube.com/live/dQw4w9WgXcQ?feature=shared",
    "https://www.youtube.com/embed/dQw4w9WgXcQ",
])
def test_youtube_urls(url: str) -> None:
    assert is_youtube(url)
    assert canonical_url(url) == "https://www.youtube.com/watch?v=dQw4w9WgXcQ"


@pytest.mark.parametrize("url", [
    "https://www.youtube.com/", "https://www.youtube.com/channel/UC123", "https://www.youtube.com/watch?v=short",
    "https://youtube.com.evil.example/watch?v=dQw4w9WgXcQ", "https://evil.example/youtu.be/dQw4w9WgXcQ",
    "ftp://youtu.be/dQw4w9WgXcQ", "https://www.youtube.com/playlist?list=PL123", "not a url",
])
def test_not_youtube_video_urls(url: str) -> None:
    assert not is_youtube(url)


YOUTUBE_AUTO_VTT = """WEBVTT
Kind: captions
Language: en

00:00:00.000 --> 00:00:02.310 align:start position:0%
\x20
welcome<00:00:00.480><c> to</c><00:00:00.640><c> the</c><00:00:00.799><c> lighthouse</c>

00:00:02.310 --> 00:00:02.320 align:start position:0%
welcome to the lighthouse
\x20

00:00:02.320 --> 00:00:05.030 align:start position:0%
welcome to the lighthouse
tides<00:00:02.800><c> &amp;</c><00:00:03.000><c> currents</c>

NOTE this block is a comment
and is skipped

2
00:00:05.030 --> 00:00:06.000
<v Speaker>Tides &amp; currents</v> matter.
"""


def _text(segments: list[dict[str, Any]]) -> str:
    return "\n".join(s["text"] for s in segments)


def test_vtt_segments_strip_tags_and_rolling_repeats() -> None:
    assert _text(vtt_segments(YOUTUBE_AUTO_VTT)) == (
        "welcome to the lighthouse\ntides & currents\nTides & currents matter."
    )


def test_vtt_segments_of_an_empty_file() -> None:
    assert vtt_segments("WEBVTT\n\n") == []


JSON3 = """{"wireMagic": "pb3", "events": [
  {"tStartMs": 0, "dDurationMs": 5000, "id": 1, "wpWinPosId": 1, "wsWinStyleId": 1},
  {"tStartMs": 0, "dDurationMs": 2000, "wWinId": 1, "segs": [{"utf8": "welcome"},
   {"utf8": " to", "tOffsetMs": 400}, {"utf8": " the lighthouse", "tOffsetMs": 800}]},
  {"tStartMs": 1900, "dDurationMs": 100, "wWinId": 1, "aAppend": 1, "segs": [{"utf8": "\\n"}]},
  {"tStartMs": 2000, "dDurationMs": 3000, "wWinId": 1,
   "segs": [{"utf8": "tides"}, {"utf8": " and currents"}]},
  {"tStartMs": 5000, "dDurationMs": 2000, "segs": [{"utf8": "[Music]"}]},
  {"tStartMs": 7000, "dDurationMs": 2000, "segs": [{"utf8": "caf\\u00e9 &amp; co"}]}
]}"""


def test_json3_segments() -> None:
    assert _text(json3_segments(JSON3)) == "welcome to the lighthouse\ntides and currents\n[Music]\ncafé & co"


def test_caption_track_preference() -> None:
    info = {
        "subtitles": {"de": [{"ext": "vtt", "url": "https://x/de.vtt"}],
                      "en-GB": [{"ext": "vtt", "url": "https://x/en-gb.vtt"}, {"ext": "srv3", "url": "https://x/s"}]},
        "automatic_captions": {"en": [{"ext": "vtt", "url": "https://x/auto.vtt"},
                                      {"ext": "json3", "url": "https://x/auto.json3"}],
                               "fr": [{"ext": "json3", "url": "https://x/fr?tlang=fr"}]},
    }
    tracks = _caption_tracks(info)
    assert [(t["url"], t["automatic"]) for t in tracks] == [
        ("https://x/en-gb.vtt", False), ("https://x/auto.json3", True), ("https://x/auto.vtt", True)]
    assert _caption_tracks({}) == []
