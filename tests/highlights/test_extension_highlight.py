"""Highlighting from the browser extension in real Chromium (the unpacked extension/ loaded as for capture) against
the live server and a loopback site: the popup's "Highlight selection" (`data-lev="highlight"`) saves an unsaved
page first and the selection as the user sees it with a note; the service worker's `lev:highlight` message on a
saved page; a page Lev fetched itself whose live copy has other words is saved as shown and highlighted; the
context menu's entry; and the refusals said in words (nothing selected, not a web page, a read-only token)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.capture.browser import CHROMIUM, Extension, extension_browser, shot
from tests.capture.test_extension import connect_with_token, open_tab, rest
from tests.sites import Site
from tests.stack import Admin, User, new_user

pytestmark = pytest.mark.skipif(not shutil.which("chromium") and not Path(CHROMIUM).exists(),
                                reason="Debian chromium is not installed (make test installs it)")


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


def select(page: Any, words: str) -> None:
    """Select `words` in the page's article as a mouse would."""
    page.evaluate("""(words) => {
        const p = [...document.querySelectorAll('p')].find(p => p.textContent.includes(words));
        const node = p.firstChild, at = node.data.indexOf(words);
        const r = document.createRange(); r.setStart(node, at); r.setEnd(node, at + words.length);
        const s = window.getSelection(); s.removeAllRanges(); s.addRange(r); }""", words)


def test_the_popup_saves_the_page_first_then_highlights_the_selection_with_a_note(  # type: ignore[no-untyped-def]
        ext: Extension, server, site: Site, owner: User) -> None:
    token = owner.token(write=True, name="Reader")
    connect_with_token(ext, server.url, token)
    lev = rest(server, token)
    url = f"{site.url}/sourdough"
    page, tab = open_tab(ext, url)
    assert lev.get("/api/v1/items", params={"url": url}).json()["total"] == 0
    select(page, "carries wild yeasts and lactic acid bacteria")
    popup = ext.popup(tab)
    popup.locator('[data-lev="note"]').fill("The starter is the yeast.")
    popup.locator('[data-lev="highlight"]').click()
    popup.get_by_role("status").wait_for()
    assert popup.get_by_role("status").inner_text() == "Highlighted: it is marked on the item's page in Lev."
    shot(popup.locator("body"), "extension-highlight")
    popup.close()
    [item] = lev.get("/api/v1/items", params={"url": url}).json()["items"]  # saved first, as Save page does
    got = lev.get(f"/api/v1/items/{item['id']}").json()
    assert got["metadata"]["captured"] == "browser"
    [h] = got["highlights"]
    assert h["text"] == "carries wild yeasts and lactic acid bacteria" and h["note"] == "The starter is the yeast."
    assert got["text"][h["char_start"]:h["char_end"]] == h["text"]

    # the message itself, on the page now saved: the same item, a second highlight across two sentences
    select(page, "Feed the starter twice a day")
    answer = ext.send({"type": "lev:highlight", "tabId": tab})
    assert answer["ok"] is True and answer["item_id"] == item["id"], answer
    marks = lev.get(f"/api/v1/items/{item['id']}/highlights").json()["highlights"]
    assert answer["highlight_id"] in {m["id"] for m in marks} and len(marks) == 2
    assert lev.get("/api/v1/items", params={"url": url}).json()["total"] == 1  # not saved twice
    page.close()


def test_a_page_lev_fetched_itself_is_saved_as_shown_when_its_copy_lacks_the_words(  # type: ignore[no-untyped-def]
        ext: Extension, server, site: Site, owner: User) -> None:
    lev = rest(server, ext.storage()["token"])
    url = f"{site.url}/quantum"
    fetched = lev.post("/api/v1/ingest", json={"kind": "url", "url": url}).json()
    page, tab = open_tab(ext, url)
    page.evaluate("""() => { const p = document.createElement('p');
        p.textContent = 'Update: a reader asked how far apart entangled photons have been sent, and the ' +
                        'answer is over a thousand kilometres.';
        document.querySelector('p').parentNode.appendChild(p); }""")
    select(page, "over a thousand kilometres")
    answer = ext.send({"type": "lev:highlight", "tabId": tab, "note": "By satellite."})
    assert answer["ok"] is True, answer
    got = lev.get(f"/api/v1/items/{answer['item_id']}").json()  # the page as the browser shows it (capture)
    assert lev.get(f"/api/v1/items/{fetched['user_item_id']}/highlights").json() == {"highlights": []}
    assert got["metadata"]["captured"] == "browser" and "over a thousand kilometres" in got["text"]
    [h] = got["highlights"]
    assert (h["id"], h["text"], h["note"]) == (answer["highlight_id"], "over a thousand kilometres", "By satellite.")
    page.close()


def test_the_context_menu_entry_and_refusals_in_words(  # type: ignore[no-untyped-def]
        ext: Extension, server, site: Site, owner: User) -> None:
    lev = rest(server, ext.storage()["token"])
    page, tab = open_tab(ext, f"{site.url}/volcano")
    nothing = ext.send({"type": "lev:highlight", "tabId": tab})
    assert nothing == {"ok": False, "error": "nothing_selected", "message": "Select some text on the page first."}
    select(page, "Stratovolcanoes such as Mount Fuji build steep cones")
    worker = ext.context.service_workers[0]
    answer = worker.evaluate("(tab) => levMenuAction({menuItemId: 'lev-highlight'}, {id: tab})", tab)
    assert answer["ok"] is True, answer
    assert ext.badge(tab) == "✎"
    [item] = lev.get("/api/v1/items", params={"url": f"{site.url}/volcano"}).json()["items"]
    assert [h["text"] for h in lev.get(f"/api/v1/items/{item['id']}/highlights").json()["highlights"]] == [
        "Stratovolcanoes such as Mount Fuji build steep cones"]

    blank, blank_tab = open_tab(ext, "data:text/html,<p>Not a web page</p>")
    assert ext.send({"type": "lev:highlight", "tabId": blank_tab})["error"] == "unsupported_page"
    blank.close()
    connect_with_token(ext, server.url, owner.token(name="Read only"))
    denied = ext.send({"type": "lev:highlight", "tabId": tab})
    assert denied["ok"] is False and denied["error"] == "capability_denied"
    assert denied["message"].startswith("This connection can only read.")
    page.close()
