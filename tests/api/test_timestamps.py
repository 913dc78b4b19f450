"""Timestamps in hits: transcript chunks keep the seconds of the provider's segments (verbose_json) or of caption
cues, search hits from them carry start_sec, end_sec and a url that opens the moment (REST and MCP), other hits are
unchanged; the stored media is served with byte ranges at that url. The transcription stand-in speaks the API's
response formats like the real one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema

from lev.ingest.chunking import chunk_text, timed_chunks
from lev.ingest.youtube import json3_segments, vtt_segments
from lev.library.reads import moment_url
from tests import fixtures_media as fm
from tests.ingest.test_media import JSON3, YOUTUBE_AUTO_VTT
from tests.ingest.test_uploads import upload, wait_item
from tests.mcp.test_mcp import call
from tests.stack import new_user
from tests.transcribe_stub import TranscribeStub

ROOT = Path(__file__).resolve().parents[2]
TOPICS = ["harbour lights", "tide tables", "fog horns", "lens polishing", "storm logs", "keeper rotas",
          "oil lamps", "shipwreck records", "seabird counts", "radio beacons"]


def lecture() -> list[tuple[float, float, str]]:
    """Forty timed sentences, four about each topic, 7.5 seconds apart: a ten-minute talk."""
    out = []
    for i in range(40):
        topic = TOPICS[i // 4]
        out.append((i * 7.5, i * 7.5 + 7.0, f"Part {i} covers {topic} in detail, with notes on how the keepers of "
                                            f"the northern station handled {topic} through the winter months."))
    return out


def test_timed_chunks_take_their_seconds_from_the_segments() -> None:
    segments = [{"start": a, "end": b, "text": f" {t} "} for a, b, t in lecture()]
    bodies, times = timed_chunks(segments, "The lighthouse lecture")
    assert len(bodies) >= 3 and len(times) == len(bodies)
    assert bodies == chunk_text("\n".join(s["text"].strip() for s in segments), "The lighthouse lecture")
    assert times[0][0] == 0.0 and times[-1][1] == 39 * 7.5 + 7.0
    for body, (start, end) in zip(bodies, times, strict=True):
        inside = [s for s in segments if s["text"].strip() in body]  # the segments the chunk holds whole
        assert inside and start <= min(s["start"] for s in inside) and end >= max(s["end"] for s in inside)
        assert end - start <= max(s["end"] for s in inside) - min(s["start"] for s in inside) + 2 * 7.5
    assert [t[0] for t in times] == sorted(t[0] for t in times)
    # segments without a usable start are left out; an empty transcript has no chunks
    assert timed_chunks([{"start": None, "end": 1.0, "text": "lost"}], None) == ([], [])


def test_caption_cues_keep_their_times() -> None:
    assert vtt_segments(YOUTUBE_AUTO_VTT) == [
        {"start": 0.0, "end": 2.31, "text": "welcome to the lighthouse"},
        {"start": 2.32, "end": 5.03, "text": "tides & currents"},
        {"start": 5.03, "end": 6.0, "text": "Tides & currents matter."}]
    assert [(s["start"], s["text"]) for s in json3_segments(JSON3)] == [
        (0.0, "welcome to the lighthouse"), (2.0, "tides and currents"), (5.0, "[Music]"), (7.0, "café & co")]


def test_moment_urls() -> None:
    watch = "https://www.youtube.com/watch?v=dQw4w9WgXcQ"
    assert moment_url("youtube", watch, "i", 75.9, stored=False) == watch + "&t=75s"
    assert moment_url("audio", "https://x.example/talk.mp3#old", "i", 12.2, stored=False) == \
        "https://x.example/talk.mp3#t=12"


def test_the_stand_in_speaks_the_transcription_api(transcribe_stub: TranscribeStub, tmp_path: Path) -> None:
    wav = fm.file_bytes(fm.make_wav(tmp_path / "api.wav", seconds=1.0))
    transcribe_stub.segments("api.wav", [(0.0, 0.6, "Hello there."), (0.6, 1.0, "General remarks.")])

    def ask(fmt: str | None, **extra: Any) -> httpx.Response:
        data = {"model": "whisper-1", **({"response_format": fmt} if fmt else {}), **extra}
        return httpx.post(f"{transcribe_stub.url}/audio/transcriptions", data=data,
                          files={"file": ("api.wav", wav, "audio/wav")})

    assert ask(None).json() == {"text": "Hello there. General remarks."}
    assert ask("text").text == "Hello there. General remarks.\n"
    verbose = ask("verbose_json").json()
    assert verbose["task"] == "transcribe" and verbose["duration"] == 1.0 and verbose["language"] == "english"
    assert [(s["id"], s["start"], s["end"], s["text"]) for s in verbose["segments"]] == [
        (0, 0.0, 0.6, " Hello there."), (1, 0.6, 1.0, " General remarks.")]
    assert {"seek", "tokens", "temperature", "avg_logprob", "compression_ratio", "no_speech_prob"} \
        <= set(verbose["segments"][0])
    assert ask("srt").text.startswith("1\n00:00:00,000 --> 00:00:00,600\nHello there.\n")
    assert ask("vtt").text.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:00.600\nHello there.\n")
    bad = ask("xml")
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    no_model = httpx.post(f"{transcribe_stub.url}/audio/transcriptions", files={"file": ("api.wav", wav)})
    assert no_model.status_code == 400


def test_transcript_hits_open_the_moment(server, api, user, admin, transcribe_stub: TranscribeStub,
                                         tmp_path: Path) -> None:
    token = user.token(write=True, kb_only=False)
    c = api(token)
    talk = lecture()
    transcribe_stub.segments("lecture.wav", talk)
    _, r = upload(c, fm.make_wav(tmp_path / "lecture.wav", seconds=2.0), "audio/wav", auto_transform=False,
                  title="The lighthouse lecture")
    assert r.status_code == 200, r.text
    item_id = r.json()["user_item_id"]
    item = wait_item(c, item_id, lambda i: i["status"] != "processing")
    assert item["status"] == "ready", item
    assert transcribe_stub.calls("lecture.wav")[-1]["response_format"] == "verbose_json"
    text = c.post("/api/v1/ingest", json={"kind": "text", "title": "Shipwrecks",
                                          "text": "Shipwreck records of the northern station list every wreck."})
    assert text.status_code == 200

    hits = c.get("/api/v1/search", params={"q": "radio beacons", "mode": "keyword", "limit": 10}).json()["results"]
    top = hits[0]
    assert top["item_id"] == item_id, hits
    said = [s for s in talk if "radio beacons" in s[2]]
    assert top["start_sec"] <= said[0][0] and top["end_sec"] >= said[0][1] - 7.0 and top["end_sec"] > top["start_sec"]
    assert top["url"] == f"{server.url}/api/v1/items/{item_id}/media#t={int(top['start_sec'])}"
    assert 250 <= top["start_sec"] <= 300  # the talk reaches radio beacons in its last minute
    where = top["location"]  # the seconds in the location too, the characters into the transcript
    assert (where["start_sec"], where["end_sec"]) == (top["start_sec"], top["end_sec"]) and where["heading"] is None
    transcript = c.get(f"/api/v1/items/{item_id}").json()["transcript"]
    assert transcript[where["char_start"]:where["char_end"]] == top["text"]
    assert transcript.splitlines() == [s[2] for s in talk]  # stored as the segments' lines: what was cut
    others = c.get("/api/v1/search", params={"q": "shipwreck records", "mode": "keyword"}).json()["results"]
    plain = next(h for h in others if h["title"] == "Shipwrecks")
    assert "start_sec" not in plain and "end_sec" not in plain and plain["url"] is None

    media = c.get(top["url"].split("#")[0])
    assert media.status_code == 200 and media.headers["content-type"] == "audio/wav"
    assert media.content == fm.file_bytes(tmp_path / "lecture.wav")
    part = c.get(top["url"].split("#")[0], headers={"Range": "bytes=0-99"})
    assert part.status_code == 206 and len(part.content) == 100
    assert part.headers["content-range"].startswith("bytes 0-99/")

    found = call(server, token, "search_knowledge_base", {"query": "radio beacons", "mode": "keyword"})
    structured = found["result"]["structuredContent"]
    tools = json.loads((ROOT / "mcp_tools.json").read_text())["tools"]
    jsonschema.validate(structured, next(t for t in tools if t["name"] == "search_knowledge_base")["outputSchema"])
    assert structured["results"][0]["start_sec"] == top["start_sec"]
    assert structured["results"][0]["url"] == top["url"]

    note_id = text.json()["user_item_id"]
    for path, who in ((f"/api/v1/items/{note_id}/media", c),  # no stored file
                      (f"/api/v1/items/{item_id}/media", api(new_user(admin).token()))):  # someone else's
        r = who.get(path)
        assert r.status_code == 404 and r.json()["error"] == "not_found", r.text
    scoped = api(user.token(folders=[user.folder("Elsewhere")]))
    assert scoped.get(f"/api/v1/items/{item_id}/media").status_code == 404
