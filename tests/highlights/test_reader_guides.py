"""The reader view of a PDF shows its text by page (a heading where each page starts) and a recording's transcript
with ▶ moments (the second each passage is spoken at); a highlight in a transcript is found by search with the
seconds of the passage it sits in. Over HTTP with a browser session, as the page is served."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests import fixtures_media as fm
from tests.api.test_timestamps import lecture
from tests.fixtures_answers import upload_pdf, wait_ready
from tests.ingest.test_uploads import upload, wait_item
from tests.stack import Admin, LiveServer
from tests.transcribe_stub import TranscribeStub


def session(server: LiveServer, admin: Admin) -> httpx.Client:
    """A signed-up person's browser session (the cookie, and the CSRF token every write sends)."""
    c = httpx.Client(base_url=server.url, timeout=120)
    email = f"reader{uuid.uuid4().hex[:8]}@example.com"
    r = c.post("/api/account/signup", json={"email": email, "password": "a long enough password"})
    assert r.status_code == 201, r.text
    admin.sql("UPDATE users SET tier = 'pro' WHERE email = :e", e=email)
    c.headers["X-CSRF-Token"] = r.json()["csrf_token"]
    return c


def test_a_pdf_reads_by_page(server: LiveServer, admin: Admin, tmp_path: Path) -> None:
    c = session(server, admin)
    pages = ["The harbour board met in March to discuss the lighthouse lamp.",
             "Second page: the keepers asked for a new lens and more oil for the winter.",
             "Third page: the board approved the lens and deferred the oil."]
    item_id = upload_pdf(c, tmp_path / "board.pdf", pages)
    wait_ready(c, [item_id])
    html = c.get(f"/items/{item_id}").text
    assert re.findall(r'<h3 class="page-mark">Page (\d+)</h3>', html) == ["1", "2", "3"]
    text = c.get(f"/api/v1/items/{item_id}").json()["text"]
    h = c.post(f"/api/v1/items/{item_id}/highlights", json={"text": "approved the lens"}).json()
    assert text[h["char_start"]:h["char_end"]] == "approved the lens"
    hit = c.get("/api/v1/search", params={"q": "approved the lens", "mode": "keyword"}).json()["results"][0]
    assert hit["highlight_id"] == h["id"] and (hit["location"]["page"], hit["location"]["page_end"]) == (3, 3)


def test_a_transcript_reads_with_moments_and_its_highlight_keeps_the_seconds(
        server: LiveServer, admin: Admin, transcribe_stub: TranscribeStub, tmp_path: Path) -> None:
    c = session(server, admin)
    talk = lecture()
    transcribe_stub.segments("reading.wav", talk)
    _, r = upload(c, fm.make_wav(tmp_path / "reading.wav", seconds=2.0), "audio/wav", auto_transform=False,
                  title="The lighthouse lecture")
    assert r.status_code == 200, r.text
    item_id = r.json()["user_item_id"]
    item: dict[str, Any] = wait_item(c, item_id, lambda i: i["status"] != "processing")
    assert item["status"] == "ready", item
    html = c.get(f"/items/{item_id}").text
    seconds = [float(s) for s in re.findall(r'data-seek="([0-9.]+)"', html)]
    assert len(seconds) >= 3 and seconds == sorted(seconds) and seconds[0] == 0.0
    assert "▶ 0:00" in html and 'id="player"' in html

    said = next(s for s in talk if "radio beacons" in s[2])
    h = c.post(f"/api/v1/items/{item_id}/highlights",
               json={"text": said[2][:40].strip(), "note": "Beacons replaced the fog horns."}).json()
    transcript = c.get(f"/api/v1/items/{item_id}").json()["transcript"]
    assert transcript[h["char_start"]:h["char_end"]] == said[2][:40].strip()
    hit = c.get("/api/v1/search", params={"q": "beacons replaced fog horns", "mode": "keyword"}).json()["results"][0]
    assert hit["highlight_id"] == h["id"]
    assert hit["start_sec"] <= said[0] and hit["location"]["start_sec"] == hit["start_sec"]
    assert hit["url"].endswith(f"/api/v1/items/{item_id}/media#t={int(hit['start_sec'])}")
