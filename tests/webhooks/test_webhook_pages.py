"""The Integrations page's webhooks block in real Chromium under a strict CSP: add an endpoint (its secret shown
once, and it verifies what arrives), a test event in the deliveries list, a failing receiver's retry, a re-send,
disable and enable, a refusal in words, remove. With LEV_SCREENSHOTS=DIR the block is saved there."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from tests.fixtures_browser import StrictPage, browser, needs_chromium, sign_up  # noqa: F401 (fixture)
from tests.fixtures_feeds import WebhookReceiver

pytestmark = needs_chromium


@pytest.fixture
def strict(browser: Any, server) -> Iterator[StrictPage]:  # type: ignore[no-untyped-def]  # noqa: F811
    p = StrictPage(browser, server.url)
    yield p
    p.close()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    r = WebhookReceiver()
    yield r
    r.close()


def rows(page: Any) -> list[str]:
    return [str(t) for t in page.locator("#webhooks table.deliveries tbody tr").all_inner_texts()]


def reload_until(page: Any, pred: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, page.inner_text("#webhooks")
        time.sleep(1)
        page.reload()


def test_webhooks_on_the_integrations_page(strict: StrictPage, receiver: WebhookReceiver) -> None:
    page = strict.page
    sign_up(page)
    page.goto("/settings/integrations")
    assert "No webhook endpoints yet." in page.inner_text("#webhooks")
    page.get_by_label("Endpoint URL").fill("ftp://example.com/hook")
    page.get_by_role("button", name="Add endpoint").click()
    alert = page.locator("#webhook-form [role=alert]")
    alert.wait_for()
    assert "URL must be an http or https URL" in alert.inner_text()

    page.get_by_label("Endpoint URL").fill(receiver.url)
    page.get_by_role("checkbox", name="item.failed").uncheck()  # every event a box of its own (issue 51)
    page.get_by_role("checkbox", name="item.deleted").check()
    assert page.get_by_role("checkbox", name="highlight.created").is_visible()
    page.get_by_label("Description (optional)").fill("My automation")
    page.get_by_role("button", name="Add endpoint").click()
    page.locator("#new-secret").wait_for()
    secret = page.inner_text("#new-secret")
    assert secret.startswith("whsec_")

    page.reload()
    assert secret not in page.content()  # shown once
    block = page.inner_text("#webhooks")
    assert receiver.url in block and "My automation" in block and "item.ready, item.deleted" in block
    with page.expect_navigation():
        page.get_by_role("button", name=f"Send a test event to {receiver.url}").click()
    (got,) = receiver.wait_for(lambda ds: len(ds) == 1)
    assert Webhook(secret).verify(got.body, got.headers)["type"] == "webhook.test"
    reload_until(page, lambda: len(rows(page)) == 1)
    assert "webhook.test" in rows(page)[0] and "succeeded" in rows(page)[0] and "HTTP 200" in rows(page)[0]

    receiver.statuses = [500]
    with page.expect_navigation():
        page.get_by_role("button", name=f"Send a test event to {receiver.url}").click()
    reload_until(page, lambda: len(rows(page)) == 3, timeout=60)  # the 500, then its retry about 5 s later
    newest, failed = rows(page)[0], rows(page)[1]
    assert "retrying" in failed and "HTTP 500" in failed and "the endpoint answered HTTP 500" in failed
    assert "\t2\t" in newest and "succeeded" in newest
    if os.environ.get("LEV_SCREENSHOTS"):
        page.locator("#webhooks").screenshot(path=str(Path(os.environ["LEV_SCREENSHOTS"]) / "webhooks.png"))

    with page.expect_navigation():
        page.locator("#webhooks table.deliveries tbody tr").nth(2).get_by_role("button", name="Re-send").click()
    receiver.wait_for(lambda ds: len(ds) == 4)
    assert receiver.deliveries[3].headers["webhook-id"] == receiver.deliveries[0].headers["webhook-id"]

    with page.expect_navigation():
        page.get_by_role("button", name=f"Disable {receiver.url}").click()
    assert "Disabled: disabled by you." in page.inner_text("#webhooks")
    with page.expect_navigation():
        page.get_by_role("button", name=f"Enable {receiver.url}").click()
    page.get_by_role("button", name=f"Rotate the secret of {receiver.url}").click()
    page.locator("#hook-secret:not([hidden])").wait_for()
    assert page.inner_text("#new-secret") not in ("", secret)
    page.goto("/settings/integrations")
    with page.expect_navigation():
        page.get_by_role("button", name=f"Remove {receiver.url}").click()
    assert "No webhook endpoints yet." in page.inner_text("#webhooks")
    assert strict.violations == []
