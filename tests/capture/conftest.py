"""The web tests' Chromium fixtures (`browser`, a module-wide Chromium; `page`, a fresh context per test)."""

from tests.web.test_web import browser, page  # noqa: F401 (fixtures)
