"""The reader view and the Highlights page in real Chromium: a selection becomes a highlight (marked with
`<mark data-highlight-id>` and listed beside the text, its offsets exact), the same from the keyboard alone, the
note edited and the highlight deleted; words not in the item said in words; a 2 MB item read part by part (the
page never carries the whole text) with a highlight near its end found in its part; the Highlights page newest
first and by folder; axe-core finds no violation on either page."""

from __future__ import annotations

import uuid
from typing import Any

from lev.library.reads import create_folder
from tests.stack import Admin, LiveServer
from tests.web.test_page_policy import _axe_source, _check
from tests.web.test_web import browser, page, pytestmark, shot, sign_up  # noqa: F401 (fixtures)

ARTICLE = ("Tide pools are small worlds left behind by the sea.\n"
           "The ochre sea star eats mussels at low tide, prying their shells apart for hours.\n"
           "Anemones close when the water leaves and open again when it returns.")


def _signed_up(page: Any, admin: Admin) -> tuple[str, str]:  # noqa: F811
    email = sign_up(page)
    uid = admin.sql("SELECT id FROM users WHERE email = :e", e=email)[0][0]
    return str(uid), page.locator('meta[name="csrf-token"]').get_attribute("content")


def _api(page: Any, csrf: str, method: str, path: str, body: Any = None) -> Any:  # noqa: F811
    r = page.request.fetch(path, method=method, headers={"X-CSRF-Token": csrf}, data=body)
    return r


def _select(page: Any, words: str) -> None:  # noqa: F811
    """Select `words` in the reader as a mouse drag would (a Range over the text nodes)."""
    page.evaluate("""(words) => {
        const runs = [...document.querySelectorAll('#reader [data-at]:not(p)')];
        const run = runs.find(r => r.textContent.includes(words));
        const node = run.firstChild, at = node.data.indexOf(words);
        const range = document.createRange();
        range.setStart(node, at); range.setEnd(node, at + words.length);
        const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
    }""", words)


def test_select_highlight_note_edit_delete_and_the_keyboard(page: Any, admin: Admin, server: LiveServer) -> None:  # noqa: F811
    uid, csrf = _signed_up(page, admin)
    item = _api(page, csrf, "POST", "/api/v1/ingest", {"kind": "text", "text": ARTICLE, "title": "Tide pools"}).json()
    item_id = item["user_item_id"]
    page.goto(f"/items/{item_id}")
    assert page.locator("#reader p").count() == 3 and page.locator("#reader mark").count() == 0
    assert not page.locator("#hl-float").is_visible()  # shown only by a selection

    _select(page, "ochre sea star eats mussels")
    page.locator("#hl-float").wait_for(state="visible")  # the floating button by the selection
    assert page.get_by_label("Words to highlight").input_value() == "ochre sea star eats mussels"
    page.get_by_label("Note (optional)").fill("Pisaster ochraceus, a keystone species.")
    page.get_by_role("button", name="Highlight", exact=True).last.click()
    page.wait_for_url(f"**/items/{item_id}?highlight=*")
    mark = page.locator("#reader mark[data-highlight-id]")
    assert mark.count() == 1 and not page.locator("#hl-float").is_visible()
    assert mark.inner_text() == "ochre sea star eats mussels"
    listed = page.request.get(f"/api/v1/items/{item_id}/highlights").json()["highlights"]
    assert len(listed) == 1 and mark.get_attribute("data-highlight-id") == listed[0]["id"]
    h = listed[0]
    assert ARTICLE[h["char_start"]:h["char_end"]] == h["text"] and h["note"].startswith("Pisaster")
    assert page.locator(".hl-list blockquote").inner_text() == "ochre sea star eats mussels"
    shot(page, "reader-highlight")

    # the keyboard alone: tab to the words, type them, tab to the note, tab to the button, Enter
    page.locator("#hl-text").focus()
    page.keyboard.type("open again when it returns")
    page.keyboard.press("Tab")  # the note
    page.keyboard.type("They close to keep their water in.")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Highlight"
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelectorAll('#reader mark').length === 2")
    second = page.locator("#reader mark", has_text="open again when it returns")
    assert second.count() == 1

    # words not in the item are said in words, and nothing is added
    page.locator("#hl-text").fill("The kelp forest sways")
    page.get_by_role("button", name="Highlight", exact=True).last.click()
    alert = page.locator("#highlight-form [role=alert]")
    alert.wait_for(state="visible")
    assert "not in the item" in alert.inner_text()

    # edit the note, then delete the first highlight
    entry = page.locator(f"#hl-{h['id']}")
    entry.get_by_text("Edit note").click()
    entry.get_by_label("Note").fill("Edited: eats mussels for hours.")
    entry.get_by_role("button", name="Save note").click()
    page.locator(f"#hl-{h['id']} .note", has_text="Edited: eats mussels").wait_for()
    page.locator(f"#hl-{h['id']}").get_by_role("button", name="Delete").click()
    page.wait_for_function("() => document.querySelectorAll('#reader mark').length === 1")
    assert len(page.request.get(f"/api/v1/items/{item_id}/highlights").json()["highlights"]) == 1


def test_a_2_mb_item_is_read_part_by_part_and_a_highlight_opens_its_part(page: Any, admin: Admin,  # noqa: F811
                                                                          server: LiveServer) -> None:
    uid, csrf = _signed_up(page, admin)
    paragraph = "Ship's log, a calm day at sea with nothing to report but the wind and the gulls. " * 3
    lines = [f"Entry {n}. {paragraph}" for n in range(8200)]
    lines[8100] = "Entry 8100. A whale breached beside the ship at dawn, its back grey as slate."
    text = "\n".join(lines)
    assert len(text.encode()) > 2_000_000
    content_id, item_id = str(uuid.uuid4()), str(uuid.uuid4())
    admin.sql("INSERT INTO contents (id, kind, title, text) VALUES (:id, 'text', 'Long log', :x)", id=content_id,
              x=text)
    admin.sql("INSERT INTO user_items (id, user_id, content_id, kind, title, in_kb, archived) "
              "VALUES (:id, :u, :c, 'text', 'Long log', true, false)", id=item_id, u=uid, c=content_id)
    made = _api(page, csrf, "POST", f"/api/v1/items/{item_id}/highlights",
                {"text": "A whale breached beside the ship", "note": "The only event."})
    assert made.status == 201, made.text()
    h = made.json()
    assert text[h["char_start"]:h["char_end"]] == "A whale breached beside the ship"

    first = page.goto(f"/items/{item_id}")
    assert first is not None and len(first.body()) < 400_000  # one part, never the whole 2 MB
    pager = page.get_by_role("navigation", name="Parts of the text (top)")
    assert pager.inner_text().startswith("Part 1 of ")
    parts = int(pager.inner_text().split(" of ")[1].split(" ")[0])
    assert parts >= 60
    page.get_by_role("navigation", name="Parts of the text (bottom)").get_by_role("link", name="Next part").click()
    page.wait_for_url("**part=2*")
    assert page.get_by_role("navigation", name="Parts of the text (top)").inner_text().startswith("Part 2 of ")

    page.locator(".hl-list").get_by_role("link", name="Show in text").click()  # the part where it starts
    page.wait_for_url(f"**highlight={h['id']}*")
    mark = page.locator(f"#reader mark[data-highlight-id='{h['id']}']")
    assert mark.inner_text() == "A whale breached beside the ship"
    assert not page.get_by_role("navigation", name="Parts of the text (top)").inner_text().startswith("Part 1 ")
    # a selection in a later part still gives exact offsets
    _select(page, "its back grey as slate")
    page.get_by_role("button", name="Highlight", exact=True).last.click()
    page.wait_for_function("() => document.querySelectorAll('#reader mark').length === 2")
    found = [x for x in page.request.get(f"/api/v1/items/{item_id}/highlights").json()["highlights"]
             if x["text"] == "its back grey as slate"]
    assert len(found) == 1 and text[found[0]["char_start"]:found[0]["char_end"]] == "its back grey as slate"


def test_the_highlights_page_and_axe_on_both_pages(page: Any, admin: Admin, server: LiveServer) -> None:  # noqa: F811
    axe = _axe_source()
    uid, csrf = _signed_up(page, admin)
    folder = admin.run(lambda s: create_folder(s, uuid.UUID(uid), "Sea"))["id"]
    sea = _api(page, csrf, "POST", "/api/v1/ingest", {"kind": "text", "text": ARTICLE, "title": "Tide pools",
                                                      "folder_id": folder}).json()["user_item_id"]
    sky = _api(page, csrf, "POST", "/api/v1/ingest", {"kind": "text", "title": "Comets",
                                                      "text": "Comets have two tails, one of dust and one of gas."}
               ).json()["user_item_id"]
    older = _api(page, csrf, "POST", f"/api/v1/items/{sea}/highlights", {"text": "small worlds", "note": "Worlds."})
    newer = _api(page, csrf, "POST", f"/api/v1/items/{sky}/highlights", {"text": "one of dust"})
    assert older.status == 201 and newer.status == 201

    _check(page, f"/items/{sea}", axe)  # the reader view with a highlight, its form and list
    _check(page, "/highlights", axe)
    quotes = page.locator(".hl-all blockquote")
    assert [quotes.nth(i).inner_text() for i in range(quotes.count())] == ["one of dust", "small worlds"]
    assert page.get_by_role("link", name="Highlights").get_attribute("aria-current") == "page"
    page.get_by_label("Folder").select_option(label="Sea")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(f"**folder_id={folder}*")
    assert page.locator(".hl-all blockquote").all_inner_texts() == ["small worlds"]
    shot(page, "highlights-page")
    page.get_by_role("link", name="Tide pools").click()
    page.wait_for_url(f"**/items/{sea}?highlight=*")
    assert page.locator("#reader mark").inner_text() == "small worlds"
    _check(page, f"/highlights?folder_id={folder}", axe)
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: the reader and the list stack
    _check(page, f"/items/{sea}", axe)
