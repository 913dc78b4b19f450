"""The browser extension tags what it saves, in real Chromium: the popup's Tags field (commas between) goes with
Save page, the tags used are remembered (newest first, ten at most) and offered as one-click chips next time, and
the service worker's messages take `tags` (a selection saved as a note, a page saved again adds its tags)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.capture.browser import CHROMIUM, Extension, extension_browser
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


def item_of(lev: Any, url: str) -> dict[str, Any]:
    found = lev.get("/api/v1/items", params={"url": url}).json()["items"]
    assert found, url
    return dict(found[0])


def test_the_popup_tags_what_it_saves_and_offers_recent_tags(ext: Extension, server, site: Site,  # type: ignore[no-untyped-def]
                                                              admin: Admin) -> None:
    owner: User = new_user(admin)
    token = owner.token(write=True, name="Browser")
    assert connect_with_token(ext, server.url, token) == "Token “Browser” saved."
    lev = rest(server, token)

    _page, tab = open_tab(ext, f"{site.url}/volcano")
    popup = ext.popup(tab)
    assert popup.locator("#recent-tags-h").is_hidden()  # nothing used yet
    popup.get_by_label("Tags").fill("Geology, travel/iceland ,")
    popup.locator('[data-lev="save-page"]').click()
    popup.get_by_role("status").wait_for()
    assert item_of(lev, f"{site.url}/volcano")["tags"] == ["Geology", "travel/iceland"]
    assert ext.storage()["recentTags"] == ["Geology", "travel/iceland"]
    popup.close()

    _page, tab = open_tab(ext, f"{site.url}/sourdough")
    popup = ext.popup(tab)
    chips = popup.locator('[data-lev="recent-tags"] button')
    assert chips.all_inner_texts() == ["Geology", "travel/iceland"]
    popup.get_by_role("button", name="Add the tag travel/iceland").click()
    popup.get_by_role("button", name="Add the tag travel/iceland").click()  # once in the field, whatever the clicks
    assert popup.get_by_label("Tags").input_value() == "travel/iceland"
    popup.get_by_label("Tags").fill(popup.get_by_label("Tags").input_value() + ", bread")
    popup.locator('[data-lev="save-page"]').click()
    popup.get_by_role("status").wait_for()
    assert item_of(lev, f"{site.url}/sourdough")["tags"] == ["bread", "travel/iceland"]
    assert ext.storage()["recentTags"] == ["travel/iceland", "bread", "Geology"]
    popup.close()

    # the messages take tags: saving the page again adds them to its item
    again = ext.send({"type": "lev:save-page", "tabId": tab, "tags": ["Kitchen"]})
    assert again["ok"] is True, again
    assert item_of(lev, f"{site.url}/sourdough")["tags"] == ["bread", "Kitchen", "travel/iceland"]
    refused = ext.send({"type": "lev:save-page", "tabId": tab, "tags": ["x" * 65]})
    assert refused["ok"] is False and refused["error"] == "invalid_body", refused
