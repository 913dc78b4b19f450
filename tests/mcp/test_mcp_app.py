"""Lev's MCP App view (issue 39 item 4) in real Chromium, hosted by a test host built on the official
@modelcontextprotocol/ext-apps AppBridge (pinned, installed into `.cache/` by tests/npm_cache.py, bundled with
esbuild): the host's MCP client (the official SDK, in the page) negotiates the extension, finds the view through the
tool's `_meta.ui.resourceUri`, reads it, renders it in a sandboxed iframe under a CSP that allows no origin, and
bridges tool input and results. The view lists a search's passages (kind, saved date, page, heading, links through
the host's open-link request) and shows an item's text with "more", which asks the host to call get_item with
next_offset. With LEV_SCREENSHOTS=DIR the views are saved there (docs/screenshots in the repository)."""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures_answers import FRESNEL, NEEDLE, build_library
from tests.fixtures_browser import CHROMIUM, FLAGS, needs_chromium
from tests.mcp.test_mcp import rpc
from tests.mcp.test_mcp_revisions import META, modern
from tests.npm_cache import CACHE, PINNED, npm_package
from tests.stack import Api, new_user

HOST_DIR = Path(__file__).with_name("app_host")
SET = "ext-apps-2.0.4"
FORWARDED = ("content-type", "accept", "mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name",
             "last-event-id")
THEME = {"theme": "light", "displayMode": "inline", "styles": {"variables": {
    "--color-background-primary": "rgb(250, 247, 240)", "--color-background-secondary": "rgb(255, 255, 255)",
    "--color-text-primary": "rgb(32, 33, 36)", "--color-text-info": "rgb(26, 95, 180)",
    "--font-sans": "Georgia, serif"}}}

pytestmark = needs_chromium


def bundle() -> Path:
    """host.js bundled with the pinned ext-apps, MCP client and esbuild (cached by the source's hash)."""
    spec, *also = PINNED[SET]
    package = npm_package(spec, SET, *also)
    modules = package.parents[1]
    source = (HOST_DIR / "host.js").read_text()
    out = CACHE / SET / f"host.bundle.{hashlib.sha256(source.encode()).hexdigest()[:12]}.js"
    if not out.exists():
        staging = out.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([str(modules / ".bin" / "esbuild"), str(HOST_DIR / "host.js"), "--bundle", "--format=esm",
                        "--platform=browser", f"--outfile={staging}", "--log-level=error"],
                       check=True, timeout=120, capture_output=True, env={**os.environ, "NODE_PATH": str(modules)},
                       cwd=str(modules.parent))
        staging.replace(out)
    return out


class Host:
    """The host page on its own loopback origin: host.html, the bundle, and /mcp forwarded to Lev's /api/mcp with
    the token added (the page never sees it)."""

    def __init__(self, lev_url: str, token: str, script: Path) -> None:
        page = (HOST_DIR / "host.html").read_bytes()
        code = script.read_bytes()
        upstream = httpx.Client(base_url=lev_url, timeout=120)

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARDED}
                r = upstream.request(self.command, "/api/mcp", content=body,
                                     headers={**headers, "Authorization": f"Bearer {token}"})
                kept = {k: v for k, v in r.headers.items() if k.lower() in ("content-type", "mcp-session-id")}
                self._send(r.status_code, r.content, kept)

            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/":
                    self._send(200, page, {"Content-Type": "text/html; charset=utf-8"})
                elif self.path == "/host.bundle.js":
                    self._send(200, code, {"Content-Type": "text/javascript"})
                elif self.path == "/mcp":
                    self._forward()
                else:
                    self._send(404, b"", {})

            def do_POST(self) -> None:  # noqa: N802
                self._forward()

            def do_DELETE(self) -> None:  # noqa: N802
                self._forward()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def settle(page: Any, view: Any) -> None:
    """Until the host has sized the iframe to the view's whole height (its size-changed notifications), then a
    frame for the browser to paint: what a screenshot should see."""
    page.wait_for_function("levHost.state.sizes.length > 0")
    height = view.locator("html").evaluate("h => h.scrollHeight")
    page.wait_for_function("([h]) => document.querySelector('iframe').getBoundingClientRect().height >= h - 2",
                           arg=[height])
    for paint in (page.locator("body"), view.locator("body")):  # a frame painted in the page and in the view
        paint.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def test_the_view_is_listed_read_and_linked(server, user) -> None:  # type: ignore[no-untyped-def]
    tok = user.token()
    tools = {t["name"]: t for t in rpc(server, tok, "tools/list").json()["result"]["tools"]}
    for name in ("search_knowledge_base", "get_item"):
        assert tools[name]["_meta"] == {"ui": {"resourceUri": "ui://lev/results.html"}}
    assert "_meta" not in tools["add_to_knowledge"]
    init = {"protocolVersion": "2025-11-25", "clientInfo": {"name": "t", "version": "1"}}
    plain = rpc(server, tok, "initialize", {**init, "capabilities": {}}).json()["result"]["capabilities"]
    assert "resources" in plain and "extensions" not in plain
    asked = {**init, "capabilities": {"extensions": {"io.modelcontextprotocol/ui": {
        "mimeTypes": ["text/html;profile=mcp-app"]}}}}
    ui = rpc(server, tok, "initialize", asked).json()["result"]["capabilities"]
    assert ui["extensions"] == {"io.modelcontextprotocol/ui": {}}
    listed = rpc(server, tok, "resources/list").json()["result"]["resources"]
    assert [(r["uri"], r["mimeType"]) for r in listed] == [("ui://lev/results.html", "text/html;profile=mcp-app")]
    read = rpc(server, tok, "resources/read", {"uri": "ui://lev/results.html"}).json()["result"]["contents"][0]
    assert read["mimeType"] == "text/html;profile=mcp-app" and read["text"].startswith("<!doctype html>")
    html = read["text"]
    assert f'content="{server.url}"' in html and "__LEV_BASE_URL__" not in html
    for needle in ("http://", "https://", "src=", "@import", "url("):  # nothing to fetch from anywhere
        assert needle not in html.replace(server.url, ""), needle
    # 2026-07-28: the same methods, the extension from the request's client capabilities, Mcp-Name = the uri
    caps = {**META, "io.modelcontextprotocol/clientCapabilities": asked["capabilities"]}
    found = modern(server, tok, "server/discover", meta=caps).json()["result"]["capabilities"]
    assert found["extensions"] == {"io.modelcontextprotocol/ui": {}} and "resources" in found
    assert "extensions" not in modern(server, tok, "server/discover").json()["result"]["capabilities"]
    uri = {"uri": "ui://lev/results.html"}
    assert modern(server, tok, "resources/list").json()["result"]["resources"] == listed
    got = modern(server, tok, "resources/read", uri, headers={"Mcp-Name": uri["uri"]}).json()["result"]
    assert got["contents"][0]["text"] == html and got["resultType"] == "complete"
    assert modern(server, tok, "resources/read", uri).json()["error"]["code"] == -32020  # Mcp-Name missing
    missing = rpc(server, tok, "resources/read", {"uri": "ui://lev/other.html"}).json()
    assert missing["error"]["code"] == -32002 and missing["error"]["data"]["error"] == "not_found"
    assert rpc(server, tok, "resources/read", {}).json()["error"]["code"] == -32602


def test_the_view_in_an_appbridge_host(server, admin, chromium, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    user = new_user(admin)
    c = Api(server.url, user.token(write=True, kb_only=False))
    library = build_library(c, admin, tmp_path)
    host = Host(server.url, user.token(kb_only=False), bundle())
    shots = os.environ.get("LEV_SCREENSHOTS")
    ctx = chromium.new_context(viewport={"width": 900, "height": 2400})  # the whole view painted at once
    page = ctx.new_page()
    requests: list[str] = []
    console: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: console.append(m.text))
    try:
        page.goto(host.url)
        page.wait_for_function("window.levHost !== undefined")
        out = page.evaluate("([a, c]) => levHost.run('search_knowledge_base', a, c)",
                            [{"query": "lighthouse lens", "limit": 5, "kind": ["pdf", "page"]}, THEME])
        assert out == {"isError": False}
        state = page.evaluate("levHost.state")
        assert state["serverCapabilities"]["extensions"] == {"io.modelcontextprotocol/ui": {}}
        assert state["resource"]["mimeType"] == "text/html;profile=mcp-app" and state["initialized"] == 1
        view = page.frame_locator("iframe")
        hits = view.locator("ol li")
        hits.first.wait_for()
        assert hits.count() == 5
        assert "for “lighthouse lens”" in view.locator("h1").inner_text()
        kinds = [k.lower() for k in view.locator(".kind").all_inner_texts()]
        assert set(kinds) <= {"pdf", "url"} and "pdf" in kinds
        pdf_hit = view.locator("li", has=view.locator(".page")).first
        assert pdf_hit.locator(".page").inner_text().startswith(("p. ", "pp. "))
        assert "saved 20" in pdf_hit.locator(".saved").inner_text()
        assert view.locator(".heading").count() >= 1  # the guide page's sections
        # the host's theme variables style the view
        assert view.locator("body").evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(250, 247, 240)"
        # links go through the host's open-link request, never a navigation of the sandbox
        page_hit = view.locator("li", has=view.locator("a.title[href^='https://']")).first
        source = page_hit.locator("a.title").get_attribute("href")
        page_hit.locator("a.title").click()
        item_id = page_hit.get_attribute("data-item-id")
        page_hit.locator("a.open-lev").click()
        page.wait_for_function("levHost.state.opened.length >= 2")
        assert page.evaluate("levHost.state.opened") == [source, f"{server.url}/items/{item_id}"]
        assert source in library.pages
        if shots:
            settle(page, view)
            page.locator("#conversation").screenshot(path=str(Path(shots) / "mcp-app-search.png"))

        # an item's text, page by page: "more" asks the host to call get_item with next_offset
        out = page.evaluate("([a, c]) => levHost.run('get_item', a, c)", [{"item_id": library.long}, THEME])
        assert out == {"isError": False}
        text = view.locator(".text")
        text.wait_for()
        first = text.evaluate("t => t.textContent")
        assert 5_000 < len(first) <= 20_000 and first.startswith("# The long logbook")
        more = view.locator("button.more")
        while more.is_visible():
            shown = text.evaluate("t => t.textContent.length")
            more.click()
            view.locator(".text").evaluate("(t, n) => new Promise(r => { const c = () => t.textContent.length > n "
                                           "? r() : setTimeout(c, 50); c(); })", shown)
        assert view.locator(".text").evaluate("t => t.textContent") == library.long_text
        assert NEEDLE in view.locator(".text").evaluate("t => t.textContent")
        assert view.locator(".shown").inner_text() == f"{len(library.long_text)} of {len(library.long_text)} characters"
        if shots:
            out = page.evaluate("([a, c]) => levHost.run('get_item', a, c)",
                                [{"item_id": library.pdf, "max_chars": 900}, THEME])
            view.locator(".text").wait_for()
            assert FRESNEL not in view.locator(".text").inner_text()
            settle(page, view)
            page.locator("#conversation").screenshot(path=str(Path(shots) / "mcp-app-item.png"))
    finally:
        ctx.close()
        host.close()
    assert all(u.startswith(host.url) for u in requests), [u for u in requests if not u.startswith(host.url)]
    assert not [m for m in console if "Content Security Policy" in m or "Refused" in m], console
