"""Sharing in real Chromium with two people in two browser contexts: the owner shares a folder from its page, the
invitee accepts on the library page, sees the folder marked shared in the sidebar and searches it; the owner
publishes it (the page and its feed open signed out), changes the role, removes the member, and the member's
search is empty at once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import feedparser
import httpx
import pytest

from tests.web.test_web import CHROMIUM, FLAGS, pytestmark, sign_up  # noqa: F401

__all__ = ["pytestmark"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def person(browser: Any, server: Any) -> Any:
    ctx = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(30_000)
    p = ctx.new_page()
    p.on("dialog", lambda d: d.accept())
    return p


def search(page: Any, q: str) -> list[str]:
    page.get_by_label("Search", exact=True).fill(q)
    page.get_by_role("radio", name="keyword").check()
    page.get_by_role("button", name="Search", exact=True).click()
    page.wait_for_load_state()
    results = page.get_by_role("list", name="Search results")
    return [a.inner_text() for a in results.get_by_role("link").all()] if results.count() else []


def test_two_people_share_a_folder_in_the_browser(browser: Any, server: Any) -> None:
    owner, member = person(browser, server), person(browser, server)
    owner_email, member_email = sign_up(owner), sign_up(member)

    owner.get_by_label("New folder").fill("Family reading")
    owner.get_by_role("button", name="Create").click()
    owner.wait_for_url(re.compile(r"/folders/"))
    folder_url = owner.url
    folder_id = folder_url.rsplit("/", 1)[1]
    owner.get_by_role("radio", name="A note").check()
    owner.get_by_label("Note", exact=True).fill("Capybaras are the largest rodents and love warm water.")
    owner.get_by_label("Title (optional)").fill("Capybara facts")
    owner.get_by_role("button", name="Add", exact=True).click()
    owner.wait_for_url(re.compile(r"/items/"))
    owner.goto(folder_url)

    # bad input is said in words; then the real invitation
    owner.get_by_label("Email", exact=True).fill(owner_email)
    owner.get_by_role("button", name="Invite").click()
    alert = owner.locator("#invite-form [role=alert]")
    alert.wait_for()
    assert "yourself" in alert.inner_text()
    owner.get_by_label("Email", exact=True).fill(member_email)
    owner.locator("#invite-role").select_option("editor")
    owner.get_by_role("button", name="Invite").click()
    link_box = owner.locator("#invite-link")
    link_box.wait_for()
    assert f"send this link to {member_email} yourself" in link_box.inner_text()  # this Lev has no mail server
    invite_url = owner.locator("#invite-url").inner_text()
    assert invite_url.startswith(f"{server.url}/invite/")
    owner.locator(f'#invited [data-invited="{member_email}"]').wait_for()  # listed at once, without a reload
    assert link_box.is_visible() and owner.locator("#invite-url").inner_text() == invite_url

    member.goto("/")  # a sign-up with the address proves nothing: no invitation shows without the link
    assert member.get_by_role("list", name="Invitations").count() == 0
    member.goto(invite_url)
    invitation = member.locator("#invitation")
    assert "Family reading" in invitation.inner_text() and owner_email in invitation.inner_text()
    member.get_by_role("button", name="Accept").click()
    member.wait_for_url(f"**/folders/{folder_id}")
    mark = member.locator("aside [data-shared]")
    assert mark.inner_text() == f"shared by {owner_email}"
    assert "you are an editor" in member.locator("main").inner_text()
    assert member.get_by_role("link", name="Capybara facts").count() >= 1
    assert search(member, "capybaras") == ["Capybara facts"]
    member.get_by_role("list", name="Search results").get_by_role("link", name="Capybara facts").click()
    member.wait_for_url(re.compile(r"/items/"))
    assert owner_email in member.locator("[data-saver]").inner_text()  # the owner's item: no rename, no delete
    assert member.get_by_role("button", name="Delete", exact=True).count() == 0
    member.goto("/")
    assert search(member, "capybaras") == ["Capybara facts"]  # the whole library's search reaches it too

    owner.reload()
    assert owner.locator("aside [data-shared]").inner_text() == "shared"
    members = owner.get_by_role("list", name="Members").inner_text()
    assert owner_email in members and member_email in members
    owner.get_by_role("button", name="Publish").click()
    link = owner.locator("#public-url")
    link.wait_for()
    public_url, feed_url = link.inner_text(), owner.locator("#feed-url-link").inner_text()
    assert public_url.startswith(f"{server.url}/p/") and feed_url == public_url + "/feed.atom"

    stranger = person(browser, server)  # signed out
    response = stranger.goto(public_url)
    assert response.status == 200 and "noindex" in response.headers["x-robots-tag"]
    assert stranger.get_by_role("heading", name="Family reading").is_visible()
    assert "Capybara facts" in stranger.locator("main").inner_text()
    assert feedparser.parse(httpx.get(feed_url, timeout=60).content).entries[0].title == "Capybara facts"

    owner.locator(f"#role-{member_user_id(owner, member_email)}").select_option("viewer")
    owner.get_by_role("button", name=f"Change the role of {member_email}").click()
    owner.locator(f'[data-member="{member_email}"] .badge', has_text="viewer").wait_for()
    member.goto(folder_url)
    member.get_by_text("you are a viewer").wait_for()

    owner.get_by_role("button", name=f"Remove {member_email}").click()
    owner.locator(f'[data-member="{member_email}"]').wait_for(state="detached")
    member.goto("/")
    assert member.locator("aside [data-shared]").count() == 0
    assert search(member, "capybaras") == []
    assert member.goto(folder_url).status == 404

    owner.goto(folder_url)
    owner.get_by_role("button", name="Turn off the public page").click()
    owner.get_by_role("button", name="Publish").wait_for()
    assert stranger.goto(public_url).status == 404


def member_user_id(page: Any, email: str) -> str:
    select = page.locator(f'[data-member="{email}"] select')
    return str(select.get_attribute("id")).removeprefix("role-")
