"""The web app in real Chromium (Debian's chromium driven by Playwright), walked as a person would: sign up,
free-tier refusal, folders, a note and a PDF that become ready, search, a single-folder token from the folder
page used over REST and revoked, the activity log and "Clear log", a password change that kills tokens, and a
phone-width check. With LEV_SCREENSHOTS=DIR the main pages are saved there (docs/screenshots in the repo)."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures_media import make_text_pdf
from tests.stack import Admin

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
PASSWORD = "a long enough password"

pytestmark = pytest.mark.skipif(not shutil.which("chromium") and not Path(CHROMIUM).exists(),
                                reason="Debian chromium is not installed (make test installs it)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, server) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    ctx = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(30_000)
    p = ctx.new_page()
    p.on("dialog", lambda d: d.accept())
    yield p
    ctx.close()


def shot(page: Any, name: str) -> None:
    target = os.environ.get("LEV_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(target) / f"{name}.png"), full_page=True)


def sign_up(page: Any) -> str:
    email = f"web{uuid.uuid4().hex[:8]}@example.com"
    page.goto("/signup")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/")
    return email


def test_signed_out_home_is_sign_in_and_wrong_password_is_said_in_words(page: Any) -> None:
    page.goto("/")
    shot(page, "sign-in")
    page.get_by_label("Email").fill("nobody@example.com")
    page.get_by_label("Password").fill("wrong password")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").inner_text() == "The email or password is wrong."
    page.goto("/activity")
    assert "/login?next=/activity" in page.url


def test_a_person_walks_every_flow(page: Any, admin: Admin, server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    email = sign_up(page)
    assert "Your library is empty" in page.inner_text("#items")
    # free tier: the form is off and says who changes the plan, and how (issue 51: no dead-end error)
    page.goto("/settings/integrations")
    assert page.get_by_role("button", name="Mint token").is_disabled()
    assert f"lev user set-tier {email} pro" in page.locator("[data-plan-note]").inner_text()
    admin.sql("UPDATE users SET tier = 'pro' WHERE lower(email) = :e", e=email)

    # a folder, a note filed into it that is ready when its page shows
    page.goto("/")
    page.get_by_label("New folder").fill("Research")
    page.get_by_role("button", name="Create", exact=True).click()
    page.wait_for_url("**/folders/*")
    folder_id = page.url.rsplit("/", 1)[1]
    page.get_by_label("A note").check()
    page.get_by_label("Title (optional)").fill("Octopus facts")
    page.get_by_label("Note", exact=True).fill("Octopuses have three hearts and blue blood.")
    page.get_by_role("button", name="Add", exact=True).click()
    page.wait_for_url("**/items/*")
    assert page.locator(".badge.s-ready").count() == 1
    assert "three hearts" in page.inner_text("#reader")
    assert "Research" in page.locator("section", has=page.locator("#org-h")).inner_text()  # filed into the folder
    shot(page, "item")

    # a PDF through the signed-URL handshake: progress, then the item page turns ready with its text
    pdf = make_text_pdf(tmp_path / "tardigrades.pdf", ["Tardigrades survive the vacuum of space."])
    page.goto(f"/folders/{folder_id}")
    page.set_input_files("#file", str(pdf))
    page.wait_for_url("**/items/*", timeout=60_000)
    page.locator(".badge.s-ready").wait_for(timeout=60_000)
    page.locator("#reader").wait_for()
    assert "vacuum of space" in page.inner_text("#reader")
    assert page.locator("h1").inner_text() in ("tardigrades.pdf", "Lev Test Document")

    # search from the library, three modes
    page.goto("/")
    page.get_by_label("Search", exact=True).fill("how many hearts does an octopus have")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**q=*")
    assert page.locator(".results li").first.inner_text().startswith("Octopus facts")
    page.get_by_label("Search", exact=True).fill("vacuum of space")
    page.get_by_label("keyword").check()
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**mode=keyword*")
    assert "Tardigrades" in page.inner_text(".results")
    shot(page, "library")

    # the folder page's "Connect an agent": a single-folder, read-only token, shown once with snippets
    page.goto(f"/folders/{folder_id}")
    page.get_by_role("link", name="Connect an agent").click()
    page.wait_for_url("**/settings/integrations?folder=*")
    assert page.get_by_label("Specific folders").is_checked()
    assert not page.get_by_label("write: add items, organise, delete").is_checked()
    assert page.locator("#t-folders option:checked").inner_text() == "Research"
    page.get_by_role("button", name="Mint token").click()
    page.locator("#minted").wait_for()
    token = page.inner_text("#new-token")
    assert re.fullmatch(r"lev_[A-Za-z0-9_-]{40,}", token)
    snippets = page.locator("[data-snippet]").all_inner_texts()
    assert len(snippets) == 4 and all(token in s for s in snippets)
    assert "claude mcp add" in snippets[0] and f"{server.url}/api/mcp" in snippets[0]
    page.locator("#tokens tr", has_text="Agent for Research").wait_for()  # listed at once (issue 51)
    assert page.locator("#tokens .empty").count() == 0
    shot(page, "integrations")
    api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"})
    assert [f["name"] for f in api.get("/api/v1/folders").json()["folders"]] == ["Research"]
    hits = api.get("/api/v1/search", params={"q": "octopus hearts"}).json()["results"]
    assert hits and hits[0]["title"] == "Octopus facts"
    assert api.post("/api/v1/ingest", json={"kind": "text", "text": "x"}).json()["error"] == "capability_denied"
    page.reload()
    row = page.locator("tr", has_text="Agent for Research")
    assert "Research" in row.inner_text() and "read" in row.inner_text()
    assert token not in page.content()  # never shown again
    row.get_by_role("button", name="Revoke Agent for Research").click()
    page.locator("tr", has_text="Agent for Research").get_by_text("revoked").wait_for()
    assert api.get("/api/v1/folders").json()["error"] == "invalid_token"

    # the activity log shows the token's requests with its query; filter, then clear it
    # the log is written in batches every 0.5 s (lev/ops/activity.py): reload until the batch holding the search is in
    # (an earlier batch may hold only the token's first request)
    for _ in range(20):
        page.goto("/activity?surface=rest")
        if page.locator("table.activity").count() and "octopus hearts" in page.inner_text("table.activity"):
            break
        page.wait_for_timeout(250)
    assert "octopus hearts" in page.inner_text("table.activity")
    assert "Agent for Research" in page.inner_text("table.activity")
    assert set(page.locator("table.activity tbody tr td:nth-child(2)").all_inner_texts()) == {"rest"}
    page.goto("/activity")
    shot(page, "activity")
    page.get_by_role("button", name="Clear log").click()
    page.wait_for_load_state("load")
    page.get_by_text("The log is empty.").wait_for()

    # change the password: the page warns first, then says how many tokens died; they answer 401
    page.goto("/settings/integrations")
    page.get_by_label("Name").fill("two")
    page.get_by_label("Specific folders").check()
    assert page.locator("#t-folders").is_visible()
    page.get_by_label("Whole library").check()
    assert page.locator("#t-folders").is_hidden()  # no folder picker for a whole-library token (issue 51)
    page.get_by_role("button", name="Mint token").click()
    page.locator("#minted").wait_for()
    second = page.inner_text("#new-token")
    page.goto("/settings/account")
    assert "revokes every token you have (1 active)" in page.inner_text(".notice")
    shot(page, "account")
    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_label("New password (at least 8 characters)").fill("another long password")
    page.get_by_role("button", name="Change password").click()
    status = page.get_by_role("status")
    status.wait_for()
    assert "1 token(s) were revoked" in status.inner_text()
    r = httpx.get(f"{server.url}/api/v1/folders", headers={"Authorization": f"Bearer {second}"})
    assert r.json()["error"] == "invalid_token"
    page.get_by_role("button", name="Sign out").last.click()
    page.wait_for_url("**/login")


def test_phone_width_is_usable_and_status_updates_live(page: Any, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 375, "height": 800})
    sign_up(page)
    csrf = page.locator('meta[name="csrf-token"]').get_attribute("content")
    item = page.request.post("/api/v1/ingest", headers={"X-CSRF-Token": csrf},
                             data={"kind": "text", "text": "Phone width note."}).json()
    # put it back to processing: the list and the item page poll until it turns ready without a reload
    admin.sql("UPDATE user_items SET status = 'processing' WHERE id = :i", i=item["user_item_id"])
    page.goto("/")
    page.locator("#items .badge.s-processing").wait_for()
    admin.sql("UPDATE user_items SET status = 'ready' WHERE id = :i", i=item["user_item_id"])
    page.locator("#items .badge.s-ready").wait_for(timeout=15_000)
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= 375, width
    page.keyboard.press("Tab")  # the skip link is the first stop and is visible when focused
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    for name in ("Library", "Integrations", "Activity", "Account"):
        assert page.get_by_role("link", name=name).is_visible()
