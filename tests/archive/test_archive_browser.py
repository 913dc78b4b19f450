"""Scripts in an archived copy never run, in real Chromium: a hostile page (inline and external scripts, event
handlers, `javascript:` links, an iframe's srcdoc, SVG scripts, a refresh) saved through the live server, its copy
opened by a signed-in user: nothing reaches the beacon the page aims at, no script ran, the copy runs in an opaque
origin that cannot read the session cookie. The same copy opened without the sandbox (its HTML alone) runs nothing
either: the cleaning holds by itself."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.archive.resources import ResourceSite, hostile_site
from tests.archive.test_archive_api import POLICY, archived
from tests.stack import Admin, User
from tests.web.test_web import browser, page, pytestmark, sign_up  # noqa: F401 (fixtures, the chromium skip)

SCRIPTED = {"/script", "/external.js", "/onload", "/onclick", "/onerror", "/js-link", "/frame", "/form",
            "/formaction", "/onfocus", "/svg", "/svg-script", "/svg-link", "/object.swf", "/embed.swf", "/video.mp4",
            "/poster.png", "/audio.mp3", "/math", "/refresh", "/preload", "/icon.png", "/dot-2x.png"}


def settle(p: Any, beacon: ResourceSite, before: int) -> None:
    """Give the page every chance to act: loaded, clicked and focused, then a moment for stray requests."""
    p.wait_for_load_state("load")
    for selector in ("p", "h1"):
        if p.locator(selector).count():
            p.locator(selector).first.click(no_wait_after=True, force=True)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and len(beacon.hits) == before:
        time.sleep(0.1)


def test_scripts_in_an_archived_copy_never_run(page: Any, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    email = sign_up(page)
    user_id = admin.sql("SELECT id FROM users WHERE lower(email) = :e", e=email.lower())[0][0]
    admin.sql("UPDATE users SET tier = 'pro' WHERE id = :u", u=user_id)  # tokens to mint
    user = User(user_id, email, admin, "pro")
    c = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {user.token(write=True)}"}, timeout=120)
    with ResourceSite() as site, ResourceSite() as beacon:
        url = hostile_site(site, beacon)
        r = c.post("/api/v1/ingest", json={"kind": "url", "url": url})
        assert r.status_code == 200, r.text
        item = r.json()["user_item_id"]
        assert archived(c, item)["status"] == "ready"
        before = len(beacon.hits)

        answer = page.goto(f"/api/v1/items/{item}/archive")
        assert answer is not None and answer.status == 200
        assert answer.headers["content-security-policy"] == POLICY
        settle(page, beacon, before)
        assert page.title() == "A hostile page"
        assert page.get_by_text("Anemones, hermit crabs and sea stars").count() == 1
        assert len(beacon.hits) == before and not SCRIPTED & set(beacon.hits), beacon.hits
        state = page.evaluate("""() => ({pwned: window.__lev_pwned === undefined ? null : window.__lev_pwned,
            scripts: document.scripts.length, origin: window.origin,
            cookie: (() => { try { return document.cookie } catch (e) { return e.name } })()})""")
        assert state == {"pwned": None, "scripts": 0, "origin": "null", "cookie": "SecurityError"}, state
        assert "lev_session" in {ck["name"] for ck in page.context.cookies()}  # signed in all along

        html = c.get(f"/api/v1/items/{item}/archive").text
        blank = page.context.new_page()
        blank.set_content(html)  # no policy at all: only the cleaning stands between the page and its scripts
        settle(blank, beacon, before)
        assert blank.evaluate("() => window.__lev_pwned === undefined && document.scripts.length === 0")
        assert len(beacon.hits) == before and not SCRIPTED & set(beacon.hits), beacon.hits
        blank.close()
