"""Real Chromium with the real unpacked extension (extension/) loaded: a Playwright persistent context on Debian's
chromium in the new headless mode, and a handle that talks to the extension as its own pages do."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.stack import ROOT

EXTENSION = ROOT / "extension"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run",
        f"--disable-extensions-except={EXTENSION}", f"--load-extension={EXTENSION}"]


@dataclass
class Extension:
    """The browser context with the extension, its id, and one extension page kept open to send it messages."""

    context: Any
    id: str
    control: Any

    def url(self, page: str) -> str:
        return f"chrome-extension://{self.id}/{page}"

    def open(self, page: str) -> Any:
        p = self.context.new_page()
        p.goto(self.url(page))
        return p

    def send(self, message: dict[str, Any]) -> dict[str, Any]:
        """A runtime message to the service worker, sent as the popup sends it; the answer."""
        return dict(self.control.evaluate("(m) => chrome.runtime.sendMessage(m)", message))

    def tab_id(self, page: Any) -> int:
        """The extension's tab id of a Playwright page (by its URL)."""
        tabs = self.control.evaluate("() => chrome.tabs.query({})")
        found = [t["id"] for t in tabs if t.get("url") == page.url]
        assert len(found) == 1, (page.url, [t.get("url") for t in tabs])
        return int(found[0])

    def badge(self, tab_id: int) -> str:
        return str(self.control.evaluate("(id) => chrome.action.getBadgeText({tabId: id})", tab_id))

    def storage(self) -> dict[str, Any]:
        return dict(self.control.evaluate("() => chrome.storage.local.get(null)"))

    def popup(self, tab_id: int) -> Any:
        """The toolbar popup, opened as a page of its own acting on `tab_id`, once it has loaded the page's state."""
        p = self.open(f"popup.html?tab={tab_id}")
        p.wait_for_function("() => !document.querySelector('#connect').hidden || "
                            "!document.querySelector('#page-state').textContent.startsWith('Checking')")
        return p


@contextmanager
def extension_browser(profile: Path, base_url: str) -> Iterator[Extension]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=False, args=ARGS, base_url=base_url,
            viewport={"width": 1100, "height": 800})
        ctx.set_default_timeout(30_000)
        try:
            worker = ctx.service_workers[0] if ctx.service_workers else ctx.wait_for_event("serviceworker")
            ext_id = worker.url.split("/")[2]
            control = ctx.new_page()
            control.goto(f"chrome-extension://{ext_id}/options.html")
            yield Extension(ctx, ext_id, control)
        finally:
            ctx.close()


def shot(element: Any, name: str) -> None:
    """A screenshot of a page or an element into LEV_SCREENSHOTS (docs/screenshots in the repository), if set."""
    target = os.environ.get("LEV_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        element.screenshot(path=str(Path(target) / f"{name}.png"))
