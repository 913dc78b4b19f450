"""Audio, video and media URLs over HTTP against the live server and the transcription provider stand-in."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests import fixtures_media as fm
from tests.ingest.test_uploads import finalize, put, search_ids, sign, upload, wait_item
from tests.stack import Api, LiveServer, new_user

USAGE = "SELECT coalesce(sum(transcription_seconds), 0) FROM usage_monthly WHERE user_id = :u"


def transcribed(item: dict[str, Any]) -> bool:
    return item["transcription_status"] in ("done", "failed")


class Files:
    """A loopback site serving media files by path (for URL ingest)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[bytes, str]] = {}
        files = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                body, ctype = files.routes.get(self.path, (b"missing", "text/plain"))
                self.send_response(200 if self.path in files.routes else 404)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def files() -> Iterator[Files]:
    f = Files()
    yield f
    f.close()


def test_wav_is_transcribed_searchable_and_charged(server, api, user, admin, transcribe_stub, tmp_path) -> None:
    c = api(user.token(write=True))
    name = f"interview-{uuid.uuid4().hex[:8]}.wav"
    transcribe_stub.text(name, "The harbour pilot explained how barges navigate the estuary at low water.")
    wav = fm.make_wav(tmp_path / name, seconds=60.0)
    started = time.perf_counter()
    _, r = upload(c, wav, "audio/wav", auto_transform=False)
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["status"] == "transcribing"
    early = c.get(f"/api/v1/items/{res['user_item_id']}").json()
    assert early["kind"] == "audio" and early["transcription_status"] in ("pending", "done")
    item = wait_item(c, res["user_item_id"], transcribed)
    elapsed = time.perf_counter() - started
    assert item["transcription_status"] == "done" and item["status"] == "ready", item
    assert "barges navigate the estuary" in item["transcript"]
    assert abs(item["metadata"]["duration_sec"] - 60.0) < 0.5 and item["metadata"]["mime"] == "audio/wav"
    assert res["user_item_id"] in search_ids(c, "barges estuary low water")
    print(f"\n1-minute WAV transcribed and searchable in {elapsed:.2f} s (stand-in answers instantly)")
    assert abs(admin.sql(USAGE, u=user.id)[0][0] - 60.0) < 0.5
    calls = transcribe_stub.calls(name)
    assert len(calls) == 1 and calls[0]["bytes"] == wav.stat().st_size and calls[0]["model"] == "whisper-1"


def test_provider_500_then_success_and_429(server, api, user, admin, transcribe_stub, tmp_path) -> None:
    c = api(user.token(write=True))
    ids = {}
    for plan in ([500, 200], [429, 200]):
        name = f"retry-{plan[0]}-{uuid.uuid4().hex[:6]}.wav"
        transcribe_stub.plan(name, plan)
        _, r = upload(c, fm.make_wav(tmp_path / name, seconds=3.0), "audio/wav", auto_transform=False)
        assert r.status_code == 200 and r.json()["status"] == "transcribing", r.text
        ids[name] = r.json()["user_item_id"]
    for name, item_id in ids.items():
        item = wait_item(c, item_id, transcribed)
        assert item["transcription_status"] == "done" and item["status"] == "ready", item
        assert [call["status"] for call in transcribe_stub.calls(name)] == transcribe_stub_statuses(name)
    assert abs(admin.sql(USAGE, u=user.id)[0][0] - 6.0) < 0.2


def transcribe_stub_statuses(name: str) -> list[int]:
    return [500, 200] if "-500-" in name else [429, 200]


def test_provider_refusal_fails_the_item_and_charges_nothing(server, api, user, admin, transcribe_stub,
                                                             tmp_path) -> None:
    c = api(user.token(write=True))
    name = f"refused-{uuid.uuid4().hex[:6]}.mp3"
    transcribe_stub.plan(name, [400])
    _, r = upload(c, fm.make_mp3(tmp_path / name, seconds=2.0), "audio/mpeg")
    assert r.status_code == 200, r.text
    item = wait_item(c, r.json()["user_item_id"], transcribed)
    assert item["transcription_status"] == "failed" and item["status"] == "failed"
    assert "refused" in item["error"] and "400" in item["error"]
    assert admin.sql(USAGE, u=user.id)[0][0] == 0


def test_video_upload_is_transcribed(server, api, user, transcribe_stub, tmp_path) -> None:
    c = api(user.token(write=True))
    name = f"clip-{uuid.uuid4().hex[:6]}.mp4"
    transcribe_stub.text(name, "A short film about kelp forests and sea otters.")
    signed, r = upload(c, fm.make_mp4(tmp_path / name, seconds=2.0), "video/mp4", auto_transform=False)
    assert signed["finalize_endpoint"] == "finalize"
    assert r.status_code == 200 and r.json()["status"] == "transcribing", r.text
    item = wait_item(c, r.json()["user_item_id"], transcribed)
    assert item["kind"] == "video" and item["transcription_status"] == "done"
    assert r.json()["user_item_id"] in search_ids(c, "kelp forests sea otters")


def test_media_finalize_errors(server, api, user, tmp_path) -> None:
    c = api(user.token(write=True))
    wav = fm.make_wav(tmp_path / "w.wav", seconds=1.0)
    data = fm.file_bytes(wav)
    signed = sign(c, "audio/wav", len(data), "w.wav").json()
    assert put(signed, data).status_code == 200
    r = finalize(c, {**signed, "finalize_endpoint": "finalize-document"}, "audio/wav", len(data), "w.wav")
    assert r.status_code == 400 and "/api/v1/uploads/finalize" in r.json()["message"]
    png = fm.file_bytes(fm.make_text_png(tmp_path / "p.png", ["x"]))
    signed = sign(c, "audio/wav", len(png), "fake.wav").json()
    assert put(signed, png).status_code == 200
    r = finalize(c, signed, "audio/wav", len(png), "fake.wav")
    assert r.status_code == 415 and r.json()["error"] == "unsupported_media_type"


def test_quota_exceeded_refuses_and_charges_nothing(server, api, admin, transcribe_stub, tmp_path) -> None:
    free = new_user(admin)
    c = api(free.token(write=True))  # minted while pro; then the account drops to the free tier (0 minutes)
    admin.sql("UPDATE users SET tier = 'free' WHERE id = :u", u=free.id)
    name = f"free-{uuid.uuid4().hex[:6]}.wav"
    wav = fm.make_wav(tmp_path / name, seconds=2.0)
    signed, r = upload(c, wav, "audio/wav")
    assert r.status_code == 402, r.text
    body = r.json()
    assert body["error"] == "quota_exceeded" and body["resource"] == "transcription_minutes"
    assert body["tier"] == "free" and body["cap_per_month"] == 0 and body["message"]
    assert admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=free.id)[0][0] == 0
    assert admin.sql(USAGE, u=free.id)[0][0] == 0 and not transcribe_stub.calls(name)

    pro = new_user(admin)
    c = api(pro.token(write=True))
    month = admin.sql("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM')")[0][0]
    admin.sql("INSERT INTO usage_monthly (user_id, month, transcription_seconds) VALUES (:u, :m, :s)",
              u=pro.id, m=month, s=600 * 60 - 1.0)
    signed, r = upload(c, wav, "audio/wav")
    assert r.status_code == 402 and r.json()["tier"] == "pro" and r.json()["cap_per_month"] == 600, r.text
    assert admin.sql(USAGE, u=pro.id)[0][0] == 600 * 60 - 1.0
    # the upload stays pending: with quota back (a new month, or usage cleared) the same finalize works
    admin.sql("DELETE FROM usage_monthly WHERE user_id = :u", u=pro.id)
    r = finalize(c, signed, "audio/wav", wav.stat().st_size, wav.name)
    assert r.status_code == 200 and r.json()["status"] == "transcribing", r.text


def test_url_ingest_of_pdf_and_audio(server, api, user, files, transcribe_stub, tmp_path) -> None:
    c = api(user.token(write=True))
    tag = uuid.uuid4().hex[:6]
    pdf = fm.make_text_pdf(tmp_path / "paper.pdf", ["Glaciers carve fjords as they grind slowly toward the sea.",
                                                    "Moraines mark where the ice once stopped."])
    files.routes[f"/paper-{tag}.pdf"] = (fm.file_bytes(pdf), "application/pdf")
    files.routes[f"/download-{tag}"] = (fm.file_bytes(pdf), "application/pdf")  # PDF known by its type only
    files.routes[f"/broken-{tag}.pdf"] = (b"%PDF-1.4\n", "application/pdf")
    files.routes[f"/fake-{tag}.pdf"] = (b"<html>not a pdf</html>", "application/pdf")
    wav_name = f"talk-{tag}.wav"
    transcribe_stub.text(wav_name, "Podcast episode about migrating humpback whales singing in the bay.")
    files.routes[f"/{wav_name}"] = (fm.file_bytes(fm.make_wav(tmp_path / "t.wav", seconds=4.0)), "audio/wav")

    r = c.post("/api/v1/ingest", json={"kind": "url", "url": f"{files.url}/paper-{tag}.pdf",
                                       "auto_transform": False})
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    item = c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()
    assert item["kind"] == "pdf" and item["url"].endswith(f"/paper-{tag}.pdf") and "Moraines" in item["text"]
    assert r.json()["user_item_id"] in search_ids(c, "glaciers carve fjords")
    r = c.post("/api/v1/ingest", json={"kind": "url", "url": f"{files.url}/download-{tag}"})
    assert r.status_code == 200 and c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()["kind"] == "pdf"
    for bad in (f"/broken-{tag}.pdf", f"/fake-{tag}.pdf", f"/missing-{tag}.pdf"):
        r = c.post("/api/v1/ingest", json={"kind": "url", "url": files.url + bad})
        assert r.status_code == 400 and r.json()["error"] == "ingest_failed", (bad, r.text)

    r = c.post("/api/v1/ingest", json={"kind": "url", "url": f"{files.url}/{wav_name}", "auto_transform": False})
    assert r.status_code == 200 and r.json()["status"] == "transcribing", r.text
    item = wait_item(c, r.json()["user_item_id"], transcribed)
    assert item["kind"] == "audio" and item["transcription_status"] == "done", item
    assert r.json()["user_item_id"] in search_ids(c, "humpback whales singing")


def test_youtube_urls_are_routed_and_fail_descriptively_offline(server, api, user) -> None:
    """No internet here: a YouTube URL reaches the yt-dlp path only up to the host check, which fails."""
    c = api(user.token(write=True))
    for url in ("https://www.youtube.com/watch?v=dQw4w9WgXcQ", "https://youtu.be/dQw4w9WgXcQ",
                "https://www.youtube.com/shorts/dQw4w9WgXcQ"):
        r = c.post("/api/v1/ingest", json={"kind": "url", "url": url})
        assert r.status_code == 400 and r.json()["error"] == "ingest_failed", r.text
        assert "youtube" in r.json()["message"].lower() or "resolve" in r.json()["message"].lower()


@pytest.fixture(scope="module")
def bare_server(data_dir: Path, server: LiveServer) -> Iterator[LiveServer]:
    """A second server on the same stack with no transcription provider (and no inline worker)."""
    srv = LiveServer(data_dir, {"LEV_RATE_LIMITS": "off", "LEV_ALLOW_PRIVATE_URLS": "true",
                                "LEV_WORKERS_INLINE": "false"}, log_name="bare").start()
    yield srv
    srv.stop()


def test_transcription_not_configured(bare_server, user, files, tmp_path) -> None:
    c = Api(bare_server.url, user.token(write=True))
    wav = fm.make_wav(tmp_path / "n.wav", seconds=1.0)
    data = fm.file_bytes(wav)
    signed = c.post("/api/v1/uploads/signed-url", json={"mime": "audio/wav", "size": len(data),
                                                         "filename": "n.wav"}).json()
    assert put(signed, data).status_code == 200
    r = finalize(c, signed, "audio/wav", len(data), "n.wav")
    assert r.status_code == 400 and r.json()["error"] == "transcription_unavailable", r.text
    assert "not configured" in r.json()["message"]
    files.routes["/bare.mp3"] = (fm.file_bytes(fm.make_mp3(tmp_path / "b.mp3")), "audio/mpeg")
    r = c.post("/api/v1/ingest", json={"kind": "url", "url": files.url + "/bare.mp3"})
    assert r.status_code == 400 and r.json()["error"] == "transcription_unavailable", r.text
    # documents still work without a provider
    pdf = fm.make_text_pdf(tmp_path / "ok.pdf", ["Documents need no transcription provider at all."])
    _, r = upload(c, pdf, "application/pdf", auto_transform=False)
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
