"""Tags and reading in the web app, in real Chromium: tags added on an item's page (comma-separated, nested), taken
off, a suggestion accepted with one click (and none applied unasked); the sidebar's tag tree with counts, a nested
tag's parent narrowing the list, `tag:` in the search box, chips in lists and hits; read and unread, the Unread
view; the reader recording progress as it scrolls, coming back to the same place, marked read at its end; a
shared folder's viewer seeing the owner's tags without the means to change them; axe-core finds no violation."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote_plus

from tests.sharing.test_sharing_api import share
from tests.stack import Admin, LiveServer, User, new_user
from tests.web.test_page_policy import _axe_source, _check
from tests.web.test_web import browser, page, pytestmark, sign_up  # noqa: F401 (fixtures, the chromium skip)

SEA = ("Tide pools hold anemones, hermit crabs and sea stars that survive twice-daily exposure to air; the "
       "ochre sea star pries open mussels with hydraulic tube feet. ")


def call(page: Any, method: str, path: str, body: Any = None) -> Any:  # noqa: F811
    csrf = page.locator('meta[name="csrf-token"]').first.get_attribute("content")
    r = page.request.fetch(path, method=method, headers={"X-CSRF-Token": csrf}, data=body, timeout=120_000)
    assert r.ok, (path, r.status, r.text())
    return r.json()


def signed_up(page: Any, admin: Admin) -> User:  # noqa: F811
    """A user signed up in the browser: pro (tokens to mint), its address verified (invitations it can answer)."""
    email = sign_up(page)
    uid = admin.sql("SELECT id FROM users WHERE lower(email) = :e", e=email.lower())[0][0]
    admin.sql("UPDATE users SET tier = 'pro', email_verified_at = now() WHERE id = :u", u=uid)
    return User(uid, email, admin, "pro")


def click_and_reload(page: Any, target: Any) -> None:  # noqa: F811
    """Click a control whose change reloads the page (data-then="reload"), and wait for the new page."""
    with page.expect_navigation(timeout=120_000):
        target.click()
    page.wait_for_load_state("load")


def wait_for(check: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_tags_on_an_item_page_the_sidebar_the_search_box_and_the_unread_view(page: Any, admin: Admin,  # noqa: F811
                                                                            server: LiveServer) -> None:
    signed_up(page, admin)
    page.goto("/")
    older = call(page, "POST", "/api/v1/ingest", {"kind": "text", "title": "Field notes", "text": SEA * 3,
                                                 "tags": ["ocean"], "auto_transform": False})["user_item_id"]
    item = call(page, "POST", "/api/v1/ingest", {"kind": "text", "title": "Tide pools", "text": SEA * 3,
                                                "auto_transform": False})["user_item_id"]
    call(page, "POST", "/api/v1/ingest", {"kind": "text", "title": "Rock pools", "text": "Limpets cling on.",
                                         "auto_transform": False})  # never opened: unread whatever the clicks do
    page.goto(f"/items/{item}")
    assert page.locator("#item-tags .chip.tag").count() == 0
    suggested = page.locator("#item-tags button.suggestion").all_inner_texts()
    assert suggested and "+ ocean" not in suggested  # the text never says "ocean"
    assert call(page, "GET", f"/api/v1/items/{item}")["tags"] == []  # offered, not applied

    page.get_by_label("Add tags").fill("Work/Clients/Acme, reading ,")
    click_and_reload(page, page.get_by_role("button", name="Add", exact=True))
    assert page.locator("#item-tags .chip.tag a").all_inner_texts() == ["reading", "Work/Clients/Acme"]
    first = page.locator("#item-tags button.suggestion").first
    accepted = first.inner_text().removeprefix("+ ")
    click_and_reload(page, first)
    assert accepted in page.locator("#item-tags .chip.tag a").all_inner_texts()
    click_and_reload(page, page.get_by_role("button", name="Remove the tag reading"))
    assert "reading" not in page.locator("#item-tags .chip.tag a").all_inner_texts()
    assert sorted(call(page, "GET", f"/api/v1/items/{item}")["tags"]) == sorted([accepted, "Work/Clients/Acme"])
    axe = _axe_source()
    _check(page, f"/items/{item}", axe)

    page.goto("/")
    tree = [" ".join(t.split()) for t in page.locator(".tag-list li").all_inner_texts()]  # the count at the right
    assert "Work" in tree and "Clients" in tree and "Acme 1" in tree and "ocean 1" in tree, tree
    page.locator(".tag-list").get_by_role("link", name="Work").click()  # a parent no item carries itself
    page.wait_for_url("**/?tag=Work")
    titles = page.locator("#items td > a").all_inner_texts()
    assert titles == ["Tide pools"], titles
    assert page.locator("#items .chip.tag").all_inner_texts() == sorted([accepted, "Work/Clients/Acme"],
                                                                        key=str.casefold)
    _check(page, "/?tag=Work", axe)

    page.goto(f"/?q={quote_plus('hermit crabs tag:work/clients')}")
    hits = page.locator(".results > li > a").all_inner_texts()
    assert set(hits) == {"Tide pools"}, hits
    assert "Work/Clients/Acme" in page.locator(".results .chip.tag").all_inner_texts()

    page.goto(f"/items/{older}")
    click_and_reload(page, page.get_by_role("button", name="Mark as read"))
    assert page.get_by_role("button", name="Mark as unread").count() == 1
    page.goto("/?read=false")
    unread = page.locator("#items td > a").all_inner_texts()
    # Tide pools may be read by now: its short text was all on screen while the test clicked on its page and the
    # page scrolled (what the reader counts as reading it to the end); the item never opened is unread for sure
    assert "Rock pools" in unread and "Field notes" not in unread, unread
    assert page.get_by_role("link", name="Unread").get_attribute("aria-current") == "page"
    _check(page, "/?read=false", axe)


def test_the_reader_records_progress_comes_back_to_it_and_marks_the_end_read(page: Any, admin: Admin,  # noqa: F811
                                                                          server: LiveServer) -> None:
    signed_up(page, admin)
    page.set_viewport_size({"width": 1000, "height": 700})
    page.goto("/")
    text = "\n".join(f"Paragraph {n}. " + SEA * 2 for n in range(80))
    item = call(page, "POST", "/api/v1/ingest", {"kind": "text", "title": "A long read", "text": text,
                                                "auto_transform": False})["user_item_id"]
    page.goto(f"/items/{item}")
    reader = page.locator("#reader")
    box = reader.bounding_box()
    page.mouse.wheel(0, box["y"] + box["height"] / 2 - 700)  # the viewport's bottom at half the text
    progress = wait_for(lambda: call(page, "GET", f"/api/v1/items/{item}")["progress"], "progress recorded")
    assert 0.35 < progress < 0.65, progress
    assert call(page, "GET", f"/api/v1/items/{item}")["read_at"] is None
    seen = page.evaluate("() => window.scrollY")

    page.goto("/")
    page.goto(f"/items/{item}")  # come back: the same place
    page.wait_for_load_state("load")
    back = wait_for(lambda: page.evaluate("() => window.scrollY") or None, "scrolled back")
    assert abs(back - seen) < 150, (back, seen)
    assert f"{round(progress * 100)}% read" in page.locator("[data-reading]").inner_text()

    page.keyboard.press("End")
    wait_for(lambda: call(page, "GET", f"/api/v1/items/{item}")["read_at"], "marked read at the end")
    assert call(page, "GET", f"/api/v1/items/{item}")["progress"] == 1


def test_a_viewer_sees_the_owners_tags_and_no_way_to_change_them(page: Any, admin: Admin,  # noqa: F811
                                                                server: LiveServer, api) -> None:  # noqa: F811
    viewer = signed_up(page, admin)
    owner = new_user(admin)
    folder = owner.folder("Reading group")
    o = api(owner.token(write=True, kb_only=False))
    share(o, folder, viewer, api(viewer.token(write=True, kb_only=False)), "viewer")
    item = o.post("/api/v1/ingest", json={"kind": "text", "title": "The owner's notes", "text": SEA,
                                          "folder_id": folder, "tags": ["book-club"]}).json()["user_item_id"]
    page.goto(f"/items/{item}")
    assert page.locator("#item-tags .chip.tag a").all_inner_texts() == ["book-club"]
    assert page.locator("#item-tags button").count() == 0 and page.get_by_label("Add tags").count() == 0
    assert page.get_by_role("button", name="Mark as read").count() == 0
    assert page.locator("#reader").get_attribute("data-record") is None


def test_a_stored_dot_dot_tag_is_never_sent_as_a_path(page: Any, admin: Admin, server: LiveServer) -> None:  # noqa: F811
    """Issue 47, the attacker's second look: a tag named `..` (front matter, before names dropped such parts) made
    the item page's × send DELETE /api/v1/items/{id}/tags/.., which the browser resolved to DELETE of the item."""
    me = signed_up(page, admin)
    page.goto("/")
    item = call(page, "POST", "/api/v1/ingest", {"kind": "text", "title": "Minutes", "text": SEA,
                                                "tags": ["project"], "auto_transform": False})["user_item_id"]
    admin.sql("UPDATE tags SET name = '..', key = '..' WHERE key = 'project' AND user_id = :u", u=me.id)  # as stored
    admin.sql("UPDATE user_items SET tag_keys = ARRAY['..'] WHERE id = :i", i=item)
    page.goto(f"/items/{item}")
    page.get_by_role("button", name="Remove the tag ..").click()
    page.locator("#item-tags [role=alert]").wait_for()
    assert "cannot be used in an address" in page.locator("#item-tags [role=alert]").inner_text()
    assert call(page, "GET", f"/api/v1/items/{item}")["title"] == "Minutes"  # still there
