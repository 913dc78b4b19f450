"""The browser extension in real Chromium (the unpacked extension/ loaded into Debian's chromium) against the live
server and loopback stand-in sites: a members-only article (a cookie in the browser, a sign-in form for Lev's own
fetch) and a page built by a script, saved with their real text; a selection; three tabs at once with progress; the
toolbar's "already saved" state; a link saved from the context menu's code path; errors said in words (an expired
token, the monthly write cap); and connecting through Lev's own OAuth consent page (chrome.identity's
launchWebAuthFlow window driven like a person would), revoked on the Integrations page.

One browser context serves the whole module; the tests run in file order and share the extension's settings."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.capture.browser import CHROMIUM, Extension, extension_browser, shot
from tests.sites import Site
from tests.stack import Admin, User, new_user
from tests.web.test_web import PASSWORD

pytestmark = pytest.mark.skipif(not shutil.which("chromium") and not Path(CHROMIUM).exists(),
                                reason="Debian chromium is not installed (make test installs it)")
CONNECT_AGAIN = ("Lev no longer accepts this connection (it expired or was revoked). Connect again in the "
                 "extension's settings.")


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


@pytest.fixture(scope="module")
def ext(server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Extension]:  # type: ignore[no-untyped-def]
    with extension_browser(tmp_path_factory.mktemp("profile"), server.url) as e:
        yield e


@pytest.fixture(scope="module")
def owner(admin: Admin) -> User:
    return new_user(admin)


def rest(server: Any, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def connect_with_token(ext: Extension, server_url: str, token: str) -> str:
    page = ext.control
    page.reload()
    page.get_by_label("Your Lev server").fill(server_url)
    page.get_by_label("Token", exact=True).fill(token)
    page.get_by_role("button", name="Save token").click()
    page.get_by_role("status").wait_for()
    return str(page.get_by_role("status").inner_text())


def open_tab(ext: Extension, url: str) -> tuple[Any, int]:
    page = ext.context.new_page()
    page.goto(url)
    return page, ext.tab_id(page)


def test_members_only_and_script_built_pages_are_saved_as_the_browser_shows_them(  # type: ignore[no-untyped-def]
        ext: Extension, server, site: Site, owner: User) -> None:
    token = owner.token(write=True, name="Browser")
    assert connect_with_token(ext, server.url, token) == "Token “Browser” saved."
    assert ext.storage()["token"] == token and ext.storage()["server"] == server.url
    assert "with a pasted token" in ext.control.locator("#connection").inner_text()
    lev = rest(server, token)
    url = f"{site.url}/members/tides"
    # Lev's own fetch meets the sign-in form; the reader's browser has the member cookie
    fetched = lev.post("/api/v1/ingest", json={"kind": "url", "url": url})
    assert fetched.status_code == 400 and "login" in fetched.json()["message"]
    ext.context.add_cookies([{"name": "member", "value": "1", "url": site.url}])
    article, tab = open_tab(ext, url)
    assert "ochre sea star" in article.inner_text("article")

    popup = ext.popup(tab)
    assert popup.locator("#page-state").inner_text() == "Not in your library yet."
    popup.locator('[data-lev="save-page"]').click()
    popup.get_by_role("status").wait_for()
    assert popup.get_by_role("status").inner_text() == "Saved: searchable now."
    popup.locator("#page-state").filter(has_text="Already in your library").wait_for()
    link = popup.locator('[data-lev="open-item"]')
    item_id = link.get_attribute("href").rsplit("/", 1)[1]
    assert link.get_attribute("href") == f"{server.url}/items/{item_id}"
    shot(popup.locator("body"), "extension-popup")
    item = lev.get(f"/api/v1/items/{item_id}").json()
    assert item["title"] == "Members only: the secret life of tide pools" and item["url"] == url
    assert "ochre sea star" in item["text"] and "forty-two species" in item["text"]
    assert item["metadata"]["captured"] == "browser"
    assert ext.badge(tab) == "✓"  # the toolbar icon says the page is in the library
    popup.close()

    # a page whose article a script builds: Lev's fetch finds an empty shell, the browser the article
    built, built_tab = open_tab(ext, f"{site.url}/script-built")
    built.get_by_text("Paper lanterns glow").wait_for()
    shell = lev.post("/api/v1/ingest", json={"kind": "url", "url": f"{site.url}/script-built"})
    assert shell.status_code == 400
    answer = ext.send({"type": "lev:save-page", "tabId": built_tab})
    assert answer["ok"] is True and answer["status"] == "ready" and answer["saved"] is True, answer
    text = lev.get(f"/api/v1/items/{answer['item_id']}").json()["text"]
    assert "Paper lanterns glow above the night market" in text and "innerHTML" not in text
    # saving the same page again updates its item (no duplicate)
    again = ext.send({"type": "lev:save-page", "tabId": built_tab})
    assert again["item_id"] == answer["item_id"]
    assert lev.get("/api/v1/items", params={"url": f"{site.url}/script-built"}).json()["total"] == 1
    built.close()
    article.close()


def test_status_knows_saved_pages_and_the_popup_links_to_them(ext: Extension, server, site: Site) -> None:  # type: ignore[no-untyped-def]
    page, tab = open_tab(ext, f"{site.url}/members/tides#comments")  # another fragment: the same page
    status = ext.send({"type": "lev:status", "tabId": tab})
    assert status["ok"] and status["saved"] is True and status["status"] == "ready"
    assert status["item_url"] == f"{server.url}/items/{status['item_id']}"
    page.wait_for_function("() => true")
    assert ext.badge(tab) == "✓"
    other, other_tab = open_tab(ext, f"{site.url}/sourdough")
    assert ext.send({"type": "lev:status", "tabId": other_tab}) == {"ok": True, "saved": False, "status": None}
    assert ext.badge(other_tab) == ""
    blank, blank_tab = open_tab(ext, "data:text/html,<p>Not a web page</p>")
    assert ext.send({"type": "lev:status", "tabId": blank_tab})["unsupported"] is True
    refused = ext.send({"type": "lev:save-page", "tabId": blank_tab})
    assert refused["ok"] is False and refused["error"] == "unsupported_page"
    for p in (page, other, blank):
        p.close()


def test_a_selection_is_saved_as_a_note_keeping_the_pages_url_and_title(  # type: ignore[no-untyped-def]
        ext: Extension, server, site: Site, owner: User) -> None:
    url = f"{site.url}/members/glaciers"
    page, tab = open_tab(ext, url)
    nothing = ext.send({"type": "lev:save-selection", "tabId": tab})
    assert nothing == {"ok": False, "error": "nothing_selected", "message": "Select some text on the page first."}
    page.evaluate("""() => { const p = document.querySelectorAll('article p')[1];
        const r = document.createRange(); r.selectNodeContents(p);
        const s = window.getSelection(); s.removeAllRanges(); s.addRange(r); }""")
    folder = owner.folder(f"Geology {uuid.uuid4().hex[:6]}")
    popup = ext.popup(tab)
    popup.locator('[data-lev="folder"]').select_option(folder)
    popup.locator('[data-lev="save-selection"]').click()
    popup.get_by_role("status").wait_for()
    assert popup.get_by_role("status").inner_text() == "The selection is saved as a note."
    lev = rest(server, ext.storage()["token"])
    [note] = lev.get("/api/v1/items", params={"folder_id": folder}).json()["items"]
    got = lev.get(f"/api/v1/items/{note['id']}").json()
    assert got["kind"] == "text" and got["title"] == "Members only: how glaciers carve valleys"
    assert got["text"].startswith("Meltwater under the ice lubricates the bed")
    assert got["metadata"]["source_url"] == url and got["folder_ids"] == [folder]
    popup.close()
    page.close()


def test_save_all_tabs_of_a_window_with_progress(ext: Extension, server, site: Site) -> None:  # type: ignore[no-untyped-def]
    urls = [f"{site.url}/a/{n}" for n in (901, 902, 903)]
    window = ext.control.evaluate("(urls) => chrome.windows.create({url: urls})", urls)
    ext.control.wait_for_function(
        "(w) => chrome.tabs.query({windowId: w}).then(ts => ts.length === 3 && ts.every(t => t.status === 'complete'))",
        arg=window["id"])
    tabs = ext.control.evaluate("(w) => chrome.tabs.query({windowId: w})", window["id"])
    popup = ext.popup(tabs[0]["id"])
    popup.locator('[data-lev="save-tabs"]').click()
    popup.get_by_role("status").wait_for()
    assert popup.get_by_role("status").inner_text() == "Saved 3 tabs."
    assert popup.locator("#progress").evaluate("(p) => [p.value, p.max]") == [3, 3]
    lev = rest(server, ext.storage()["token"])
    for url in urls:
        [item] = lev.get("/api/v1/items", params={"url": url}).json()["items"]
        assert item["status"] == "ready" and item["title"].startswith("Notes on "), item
    # the message the popup sends, answered with every item id
    answer = ext.send({"type": "lev:save-tabs", "windowId": window["id"]})
    assert answer["ok"] and answer["saved"] == 3 and len(answer["item_ids"]) == 3 and answer["failed"] == []
    popup.close()
    ext.control.evaluate("(w) => chrome.windows.remove(w)", window["id"])


def test_a_link_from_the_context_menu_is_fetched_by_lev(ext: Extension, server, site: Site) -> None:  # type: ignore[no-untyped-def]
    answer = ext.send({"type": "lev:save-link", "url": f"{site.url}/quantum"})
    assert answer["ok"] and answer["status"] == "ready", answer
    lev = rest(server, ext.storage()["token"])
    assert "entanglement" in lev.get(f"/api/v1/items/{answer['item_id']}").json()["text"]
    login_only = ext.send({"type": "lev:save-link", "url": f"{site.url}/members/glaciers?fresh=1"})
    assert login_only["ok"] is False and login_only["error"] == "ingest_failed"
    assert login_only["message"].startswith("Lev could not save this: page has no readable text")


def test_errors_are_said_in_words(ext: Extension, server, site: Site, owner: User, admin: Admin) -> None:  # type: ignore[no-untyped-def]
    page, tab = open_tab(ext, f"{site.url}/volcano")
    capped = owner.token(write=True, write_cap=1, name="Capped")
    connect_with_token(ext, server.url, capped)
    assert ext.send({"type": "lev:save-page", "tabId": tab})["ok"] is True
    over = ext.send({"type": "lev:save-page", "tabId": tab})
    assert over["error"] == "rate_limited" and "this month's saves" in over["message"], over
    words = ext.control.evaluate("""() => import('./lib/errors.js').then(({inWords}) => [
        inWords(402, {error: 'payment_required', tier: 'free', cap: 0, used: 0}).message,
        inWords(402, {error: 'quota_exceeded', tier: 'free', message: 'The free plan has 0 minutes left.'}).message,
        inWords(429, {error: 'rate_limited', retry_after_sec: 600}).message,
        inWords(413, {error: 'file_too_large', maxBytes: 5242880}).message])""")
    assert words == ["Your free plan cannot connect apps (cap 0, used 0). Upgrade the plan on your Lev server.",
                     "The free plan has 0 minutes left.",
                     "Too many saves in a short time: Lev takes more in 10 minute(s).",
                     "This page is larger than 5 MB, the most Lev takes for a saved page. Save the link instead "
                     "(right-click it)."]
    # an expired token: the popup says to connect again
    token = owner.token(write=True, name="Soon expired")
    connect_with_token(ext, server.url, token)
    token_id = rest(server, token).get("/api/v1/token").json()["id"]
    admin.sql("UPDATE tokens SET expires_at = now() - interval '1 minute' WHERE id = :t", t=token_id)
    popup = ext.popup(tab)
    assert popup.locator("#page-state").inner_text() == CONNECT_AGAIN
    popup.locator('[data-lev="save-page"]').click()
    popup.get_by_role("alert").wait_for()
    assert popup.get_by_role("alert").inner_text() == CONNECT_AGAIN
    assert ext.send({"type": "lev:save-page", "tabId": tab})["error"] == "invalid_token"
    popup.close()
    page.close()


def test_connect_through_lev_consent_page_then_revoke_on_integrations(  # type: ignore[no-untyped-def]
        ext: Extension, server, site: Site, admin: Admin) -> None:
    web = ext.context.new_page()  # a person with a Lev account, signed in in this browser
    email = f"ext{uuid.uuid4().hex[:8]}@example.com"
    web.goto("/signup")
    web.get_by_label("Email").fill(email)
    web.get_by_label("Password").fill(PASSWORD)
    web.get_by_role("button", name="Create account").click()
    web.wait_for_url("**/")
    admin.sql("UPDATE users SET tier = 'pro' WHERE email = :e", e=email)

    settings = ext.control
    settings.reload()
    settings.locator("#connection").filter(has_text="onnect").wait_for()
    if settings.get_by_role("button", name="Disconnect").is_enabled():  # the pasted token of the tests above
        settings.get_by_role("button", name="Disconnect").click()
    settings.locator("#connection").filter(has_text="Not connected.").wait_for()
    settings.get_by_label("Your Lev server").fill(server.url)
    with ext.context.expect_page() as opened:  # chrome.identity.launchWebAuthFlow's window
        settings.get_by_role("button", name="Connect with Lev").click()
    consent = opened.value
    consent.wait_for_load_state()
    assert consent.get_by_role("heading").first.inner_text() == "Connect Lev browser extension to your Lev library?"
    assert "Lev's REST API" in consent.inner_text("main") and f"{ext.id}.chromiumapp.org" in consent.inner_text("main")
    shot(consent, "extension-consent")
    consent.get_by_label("write: add pages and notes").check()
    consent.get_by_role("button", name="Allow").click()
    settings.get_by_role("status").filter(has_text="Connected.").wait_for()
    assert settings.get_by_role("status").inner_text() == "Connected. The toolbar button saves pages now."
    assert "through Lev's consent page as “Lev browser extension”" in settings.locator("#connection").inner_text()
    stored = ext.storage()
    assert "token" not in stored and stored["grant"]["scope"] == "lev:read lev:write"

    page, tab = open_tab(ext, f"{site.url}/sourdough")
    saved = ext.send({"type": "lev:save-page", "tabId": tab})
    assert saved["ok"] is True, saved
    grant = rest(server, stored["grant"]["access_token"])  # a grant for the REST API, not for MCP
    assert grant.get(f"/api/v1/items/{saved['item_id']}").json()["title"] == "Baking sourdough bread at home"
    mcp = httpx.post(f"{server.url}/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                     headers={"Authorization": f"Bearer {stored['grant']['access_token']}",
                              "Accept": "application/json, text/event-stream"})
    assert mcp.status_code == 401
    # an access token that ran out is refreshed on its own (rotating the refresh token)
    ext.control.evaluate("() => chrome.storage.local.get('grant').then(({grant}) => "
                         "chrome.storage.local.set({grant: {...grant, expires_at: 0}}))")
    assert ext.send({"type": "lev:save-page", "tabId": tab})["ok"] is True
    assert ext.storage()["grant"]["refresh_token"] != stored["grant"]["refresh_token"]

    web.goto("/settings/integrations")  # the connection is listed like any app's, and revocable there
    row = web.locator("tr", has_text="Lev browser extension")
    assert "read, write" in row.inner_text() and "Whole library" in row.inner_text()
    row.get_by_role("button", name="Revoke Lev browser extension").click()
    web.locator("tr", has_text="Lev browser extension").get_by_text("revoked").wait_for()
    refused = ext.send({"type": "lev:save-page", "tabId": tab})
    assert refused == {"ok": False, "error": "invalid_token", "message": CONNECT_AGAIN}
    page.close()
    web.close()
