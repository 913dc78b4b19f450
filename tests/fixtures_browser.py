"""Chromium for page tests (Debian's, driven by Playwright) under a strict Content Security Policy: every answer
of the app gets one (no inline script or handler, nothing from elsewhere), and a page that breaks it records the
violation, so a test asserts none happened."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
PASSWORD = "a long enough password"
# Scripts strictly from the app's own files (no inline script, no on* handler). Styles may be inline: htmx 2.0.4
# injects its indicator style element unless configured otherwise (the app's own CSP headers decide that).
CSP = ("default-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; "
       "style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")

needs_chromium = pytest.mark.skipif(not shutil.which("chromium") and not Path(CHROMIUM).exists(),
                                    reason="Debian chromium is not installed (make test installs it)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


class StrictPage:
    """A page whose documents carry CSP; `violations` collects what the browser refused."""

    def __init__(self, browser: Any, base_url: str) -> None:
        self.ctx = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
        self.ctx.set_default_timeout(30_000)
        self.violations: list[str] = []

        def with_csp(route: Any) -> None:
            if route.request.resource_type != "document":  # the policy is the document's; API calls pass untouched
                route.continue_()
                return
            response = route.fetch()
            headers = {**response.headers, "content-security-policy": CSP}
            route.fulfill(response=response, headers=headers)

        self.ctx.route(f"{base_url}/**", with_csp)
        self.page = self.ctx.new_page()
        self.page.on("dialog", lambda d: d.accept())
        self.page.on("console", lambda m: self.violations.append(m.text)
                     if "Content Security Policy" in m.text else None)

    def close(self) -> None:
        self.ctx.close()


def sign_up(page: Any) -> str:
    email = f"web{uuid.uuid4().hex[:8]}@example.com"
    page.goto("/signup")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/")
    return email
