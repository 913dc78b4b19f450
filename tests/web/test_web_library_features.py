"""The Import page, similar items on the item page and transcript moments, in real Chromium: a person uploads a
Chromium bookmark export, watches the progress bar fill, finds the folders; opens an item and sees similar ones;
searches a recording and opens the hit at the right second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import fixtures_media as fm
from tests.api.test_timestamps import lecture
from tests.fixtures_imports import chromium_bookmarks
from tests.sites import Site
from tests.stack import Admin
from tests.transcribe_stub import TranscribeStub
from tests.web.test_web import browser, page, pytestmark, shot, sign_up  # noqa: F401 (fixtures, the chromium skip)


def test_import_page_progress_folders_and_similar_items(page: Any, tmp_path: Path) -> None:  # noqa: F811
    site = Site()
    try:
        sign_up(page)
        page.get_by_role("link", name="Import").click()
        page.wait_for_url("**/import")
        assert "No imports yet." in page.inner_text("#imports")
        bar = [("folder", "Reading", [("link", f"Part {n}", f"{site.url}/a/{n}") for n in range(6)]
                + [("folder", "Volcanoes", [("link", "Volcanoes", f"{site.url}/volcano")])]),
               ("link", "Gone", f"{site.url}/missing")]
        file = tmp_path / "bookmarks_11_24_26.html"
        file.write_bytes(chromium_bookmarks(bar))
        page.set_input_files("#import-file", str(file))
        page.get_by_role("button", name="Import", exact=True).click()
        page.wait_for_url("**/import?started=*")
        done = page.locator('article.import[data-status="done"]')
        done.wait_for(timeout=60_000)  # the list polls itself while the import runs
        progress = done.locator("progress")
        assert progress.get_attribute("value") == progress.get_attribute("max") == "8"
        state = done.locator(".import-state").inner_text()
        assert "Done: 8 links" in state and "7 imported" in state and "1 failed" in state
        folders = done.locator(".import-folders li").all_inner_texts()
        assert folders == ["Bookmarks bar 1", "Bookmarks bar / Reading 6", "Bookmarks bar / Reading / Volcanoes 1"]
        done.get_by_text("1 link could not be fetched").click()
        assert "404" in done.locator("details").first.inner_text()
        shot(page, "import")
        done.get_by_role("link", name="Bookmarks bar / Reading", exact=True).click()
        page.wait_for_url("**/folders/*")
        assert page.locator("#items tbody tr").count() == 6

        # an item page lists similar items, best first, linked
        page.get_by_role("link", name="Part 4").click()
        page.wait_for_url("**/items/*")
        similar = page.locator("ol.similar li")
        assert similar.count() == 5
        assert all(t.rstrip().endswith(("very close", "close", "related")) for t in similar.all_inner_texts())
        similar.first.get_by_role("link").click()
        page.wait_for_url("**/items/*")
        assert page.locator("h1").inner_text().startswith(("Part", "Volcanoes", "Notes on"))
    finally:
        site.close()


def test_a_transcript_hit_opens_the_recording_at_its_second(page: Any, admin: Admin,  # noqa: F811
                                                           transcribe_stub: TranscribeStub, tmp_path: Path) -> None:
    email = sign_up(page)
    admin.sql("UPDATE users SET tier = 'pro' WHERE lower(email) = :e", e=email)  # transcription needs minutes
    talk = [(a / 10, b / 10, t) for a, b, t in lecture()]  # the same talk, ten times faster: 30 s
    transcribe_stub.segments("keepers.wav", talk)
    page.goto("/")
    page.set_input_files("#file", str(fm.make_wav(tmp_path / "keepers.wav", seconds=31.0, rate=8000)))
    page.wait_for_url("**/items/*", timeout=60_000)
    page.locator(".badge.s-ready").wait_for(timeout=60_000)
    assert page.locator("audio#player").count() == 1

    page.goto("/?q=radio+beacons&mode=keyword")
    moment = page.locator(".results li").first.locator("a.moment")
    href = moment.get_attribute("href")
    assert href and "/media#t=" in href
    second = int(href.rsplit("=", 1)[1])
    assert 24 <= second <= 30, href
    moment.click()
    page.wait_for_url("**/media#t=*")
    page.wait_for_function("() => { const m = document.querySelector('video, audio');"
                           " return m && m.readyState >= 1; }")
    at = page.evaluate("document.querySelector('video, audio').currentTime")
    assert abs(at - second) < 1.0, (at, second)
