"""Lev as an installable web app and a phone's share target, in real Chromium: the icon (no more 404 for
/favicon.ico), the manifest with its share_target, the service worker the pages register (installable by Chromium's
own check, caching nothing), and /share: a shared link or text opens the Add form pre-filled (after sign-in when
signed out) and one tap saves it through the JSON API with the session's CSRF token."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lev.handlers.pwa import prefill
from tests.sites import Site
from tests.stack import Admin
from tests.web.test_web import PASSWORD, pytestmark, shot, sign_up  # noqa: F401 (pytestmark)


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def test_manifest_service_worker_and_icons_over_http(server) -> None:  # type: ignore[no-untyped-def]
    m = httpx.get(f"{server.url}/manifest.webmanifest")
    assert m.status_code == 200 and m.headers["content-type"].startswith("application/manifest+json")
    manifest = m.json()
    assert manifest["name"] == "Lev" and manifest["start_url"] == "/" and manifest["display"] == "standalone"
    assert manifest["share_target"] == {"action": "/share", "method": "POST", "enctype": "multipart/form-data",
                                        "params": {"title": "title", "text": "text", "url": "url"}}
    sizes = {i["sizes"] for i in manifest["icons"] if i["type"] == "image/png"}
    assert {"192x192", "512x512"} <= sizes
    for icon in manifest["icons"]:
        r = httpx.get(server.url + icon["src"])
        assert r.status_code == 200 and r.headers["content-type"] == icon["type"], icon
    sw = httpx.get(f"{server.url}/sw.js")
    assert sw.status_code == 200 and sw.headers["content-type"].startswith("text/javascript")
    assert "caches" not in sw.text  # no offline copy of anything
    fav = httpx.get(f"{server.url}/favicon.ico")
    assert fav.status_code == 200 and fav.headers["content-type"] == "image/x-icon" and fav.content[:4] == b"\0\0\1\0"


def test_the_extension_is_a_download_linked_from_integrations(server, admin: Admin) -> None:  # type: ignore[no-untyped-def]
    """GET /extension.zip: the extension/ folder, zipped under one top folder (issue 51: unzipping it makes
    `lev-extension/`, what a user of the wheel loads unpacked, not loose files in the current folder)."""
    import io
    import json
    import zipfile

    from tests.auth.test_account import Browser
    from tests.stack import ROOT

    r = httpx.get(f"{server.url}/extension.zip")
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip", r.headers
    assert "attachment" in r.headers["content-disposition"]
    archive = zipfile.ZipFile(io.BytesIO(r.content))
    files = sorted(p.relative_to(ROOT / "extension").as_posix() for p in (ROOT / "extension").rglob("*") if p.is_file())
    assert sorted(archive.namelist()) == [f"lev-extension/{name}" for name in files]
    assert all(archive.read(f"lev-extension/{name}") == (ROOT / "extension" / name).read_bytes() for name in files)
    assert json.loads(archive.read("lev-extension/manifest.json"))["manifest_version"] == 3
    b = Browser(server.url)
    assert b.signup().status_code == 201
    page = b.client.get("/settings/integrations").text
    assert 'href="/extension.zip"' in page and "repository" not in page.split('id="ext-h"', 1)[1].split("</p>")[0]


def test_prefill_finds_the_link_in_shared_text() -> None:
    assert prefill({"text": "Look at this https://example.com/a?b=1. Nice!", "title": "A page"}) == {
        "kind": "url", "url": "https://example.com/a?b=1", "title": "A page", "text": "Look at this . Nice!"}
    assert prefill({"url": "https://example.com/x", "text": "Example", "title": "Example"})["text"] == ""
    assert prefill({"url": "javascript:alert(1)", "text": "no link here"}) == {
        "kind": "text", "url": "", "title": "", "text": "no link here"}
    assert prefill({})["kind"] == "text"


def test_pages_register_the_service_worker_and_are_installable(page: Any, server) -> None:  # type: ignore[no-untyped-def]
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    sign_up(page)
    scope = page.evaluate("() => navigator.serviceWorker.ready.then((r) => r.active.scriptURL)")
    assert scope == f"{server.url}/sw.js"
    cdp = page.context.new_cdp_session(page)
    errors = cdp.send("Page.getInstallabilityErrors")["installabilityErrors"]
    assert [e["errorId"] for e in errors] in ([], ["in-incognito"])  # a test context is incognito: nothing else
    assert cdp.send("Page.getAppManifest")["errors"] == []
    page.goto("/settings/integrations")
    assert missing == []  # the favicon and every icon are there


def _share_form(page: Any, action: str, fields: dict[str, str]) -> None:
    """What the system share sheet does: a multipart POST of title, text and url to the manifest's action."""
    page.evaluate("""([action, fields]) => {
        const f = document.createElement('form'); f.method = 'post'; f.action = action;
        f.enctype = 'multipart/form-data';
        for (const [k, v] of Object.entries(fields)) { const i = document.createElement('input');
            i.type = 'hidden'; i.name = k; i.value = v; f.appendChild(i); }
        document.body.appendChild(f); f.submit(); }""", [action, fields])


def test_shared_link_goes_through_sign_in_and_saves_in_one_tap(page: Any, server, site: Site,  # type: ignore[no-untyped-def]
                                                              admin: Admin) -> None:
    email = sign_up(page)
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/login")
    uid = admin.sql("SELECT id FROM users WHERE email = :e", e=email)[0][0]
    count = admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=uid)[0][0]
    _share_form(page, "/share", {"title": "How volcanoes form", "text": f"Read this: {site.url}/volcano"})
    page.wait_for_url("**/login?next=*")  # signed out: sign in first, then back with what was shared
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/share?**")
    assert page.get_by_label("Link", exact=True).input_value() == f"{site.url}/volcano"
    assert page.get_by_label("Title (optional)").input_value() == "How volcanoes form"
    assert page.get_by_role("radio", name="The link").is_checked()
    assert admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=uid)[0][0] == count  # nothing yet
    page.set_viewport_size({"width": 390, "height": 760})  # a phone
    shot(page, "share-target")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url("**/items/*")
    assert page.get_by_role("heading", level=1).inner_text() == "How volcanoes form"
    assert admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=uid)[0][0] == count + 1


def test_shared_text_becomes_a_note_and_share_posts_store_nothing(page: Any, server, admin: Admin) -> None:  # type: ignore[no-untyped-def]
    email = sign_up(page)
    uid = admin.sql("SELECT id FROM users WHERE email = :e", e=email)[0][0]
    folder = f"Shared {uuid.uuid4().hex[:6]}"
    page.goto("/")
    page.get_by_label("New folder").fill(folder)
    page.get_by_role("button", name="Create").click()
    page.wait_for_url("**/folders/*")
    _share_form(page, "/share", {"text": "Lanterns are folded from mulberry paper.", "title": ""})
    page.wait_for_url("**/share")  # signed in: the form at once, from the POST itself
    assert page.get_by_role("radio", name="A note").is_checked()
    assert page.get_by_label("Note", exact=True).input_value() == "Lanterns are folded from mulberry paper."
    assert admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=uid)[0][0] == 0
    page.get_by_label("Folder (optional)").select_option(label=folder)
    page.get_by_role("button", name="Save").click()
    page.wait_for_url("**/items/*")
    assert folder in page.inner_text("main")
    # the JSON API behind the form still wants the session's CSRF token: a cross-site form cannot save
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    forged = httpx.post(f"{server.url}/api/v1/ingest", json={"kind": "text", "text": "forged"}, cookies=cookies)
    assert forged.status_code == 403 and forged.json()["error"] == "csrf_failed"
    assert admin.sql("SELECT count(*) FROM user_items WHERE user_id = :u", u=uid)[0][0] == 1
