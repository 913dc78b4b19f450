"""The library page's search box understands `site:`, `kind:`, `after:`, `before:` and `folder:"Name"` (issue 39),
with a line of help under it, in real Chromium: each operator narrows the hits, each hit says its kind, saved date
and where it is; a bad operator is said in words."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote_plus

import httpx

from tests.stack import Admin, User
from tests.web.test_web import browser, page, pytestmark, sign_up  # noqa: F401 (fixtures, the chromium skip)

PAGES = {"https://example.org/a": "Harbour lights of the old town", "https://news.example.org/b": "Harbour news",
         "https://elsewhere.net/c": "Harbour elsewhere"}


def test_operators_narrow_the_search(page: Any, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    email = sign_up(page)
    admin.sql("UPDATE users SET tier = 'pro' WHERE lower(email) = :e", e=email.lower())  # pro: tokens to mint
    user_id = admin.sql("SELECT id FROM users WHERE lower(email) = :e", e=email.lower())[0][0]
    user = User(user_id, email, admin, "pro")
    c = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {user.token(write=True)}"}, timeout=120)
    ids = {}
    for url, title in PAGES.items():
        r = c.post("/api/v1/ingest", json={"kind": "page", "url": url, "auto_transform": False,
                                            "html": f"<html><body><article><h1>{title}</h1><p>The harbour lighthouse "
                                                    f"guides the fishing boats home, says {title}.</p></article>"
                                                    "</body></html>"})
        assert r.status_code == 200, r.text
        ids[url] = r.json()["user_item_id"]
    note = c.post("/api/v1/ingest", json={"kind": "text", "title": "Old harbour note", "auto_transform": False,
                                          "text": "A note on the harbour lighthouse from last winter."}).json()
    admin.sql("UPDATE user_items SET created_at = '2026-01-15T10:00:00Z' WHERE id = :i", i=note["user_item_id"])
    folder = user.folder("Cuttings")
    assert c.post(f"/api/v1/items/{ids['https://elsewhere.net/c']}/folders",
                  json={"folder_ids": [folder]}).status_code == 200

    def titles(q: str) -> list[str]:
        page.goto(f"/?q={quote_plus(q)}")
        return page.locator(".results li > a").all_inner_texts()

    page.goto("/")
    help_line = page.locator("#q-help")
    assert "site:" in help_line.inner_text() and 'folder:"Name"' in help_line.inner_text()
    assert page.locator("#q").get_attribute("aria-describedby") == "q-help"
    assert set(titles("harbour lighthouse")) == {*PAGES.values(), "Old harbour note"}
    assert set(titles("harbour lighthouse site:example.org")) == {"Harbour lights of the old town", "Harbour news"}
    assert titles("harbour lighthouse kind:text") == ["Old harbour note"]
    assert titles("harbour lighthouse before:2026-02-01") == ["Old harbour note"]
    assert "Old harbour note" not in titles("after:2026-02-01 harbour lighthouse")
    assert titles('harbour lighthouse folder:"cuttings"') == ["Harbour elsewhere"]
    meta = page.locator(".results li .hit-meta").first.inner_text()
    assert re.match(r"Web page\s*·?\s*\S+\s*·?\s*saved \d+ \w{3} 20\d\d", meta), meta
    assert page.locator("#q").input_value() == 'harbour lighthouse folder:"cuttings"'  # the box keeps what was typed
    titles("harbour lighthouse kind:worksheet")
    assert "kind" in page.get_by_role("alert").inner_text()
    titles('harbour folder:"Nowhere"')
    assert 'no folder named "Nowhere"' in page.get_by_role("alert").inner_text()
