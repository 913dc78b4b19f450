"""lev.net.guard and .pages against a stand-in web site on 127.0.0.1 (and the SSRF guard, private URLs off)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lev.core.errors import ApiError
from lev.ingest.urls import canonical_url, classify_media_url
from lev.ingest.webpage import MAX_BYTES, UnsupportedMedia, fetch_page
from lev.net.guard import check_host, is_blocked_address
from lev.plumbing.ports import Outbound

ARTICLE = """<!doctype html>
<html lang="en"><head>
<meta charset="utf-8">
<title>How Lighthouses Work | Coastal Notes</title>
<meta name="author" content="Ada Keeper">
<meta name="description" content="A short history of lighthouse optics.">
<meta property="og:site_name" content="Coastal Notes">
</head><body>
<header><nav><ul>
<li><a href="/">Home</a></li><li><a href="/about">About us</a></li>
<li><a href="/shop">NAVSHOP merchandise store</a></li></ul></nav></header>
<main><article>
<h1>How Lighthouses Work</h1>
<p>Lighthouses guided ships along dangerous coasts for centuries. Early towers burned wood or coal
in open fires, which produced a weak and smoky light that sailors could barely see in bad weather.</p>
<p>The Fresnel lens, introduced in 1823 by the French physicist Augustin-Jean Fresnel, changed
everything. Its concentric rings of glass prisms bent scattered light into a single horizontal beam
visible more than twenty nautical miles out to sea.</p>
<p>Each lighthouse has a characteristic pattern of flashes, so a navigator can identify it at night.
The pattern is printed on nautical charts, next to the height of the light and its range.</p>
<table><tr><th>Order</th><th>Focal length</th></tr><tr><td>First</td><td>920 mm</td></tr>
<tr><td>Sixth</td><td>150 mm</td></tr></table>
<p>Today most lights are automated and monitored remotely, and many historic towers have become
museums where visitors can climb the spiral stairs to the lantern room.</p>
</article></main>
<footer><p>FOOTERCOPY 2024 Coastal Notes. All rights reserved.</p>
<p>Subscribe to our newsletter for FOOTERPROMO offers.</p></footer>
</body></html>
"""


class Site:
    """A threaded HTTP server on 127.0.0.1 with a fixed route table, recording every request."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.hits: list[str] = []
        self.sent_big = 0
        self.big_done = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                site.hits.append(self.path)
                site.route(self)

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.port = self.server.server_address[1]
        self.base = f"http://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def route(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0]
        if path == "/article":
            self.send(h, 200, ARTICLE.encode(), "text/html; charset=utf-8")
        elif path == "/r1":
            self.redirect(h, 301, "/r2")
        elif path == "/r2":
            self.redirect(h, 302, f"{self.base}/article?utm_source=x&id=7#top")
        elif path == "/to-file":
            self.redirect(h, 302, "file:///etc/passwd")
        elif path.startswith("/loop"):
            n = int(path.removeprefix("/loop") or 0)
            self.redirect(h, 302, f"/loop{n + 1}")
        elif path.startswith("/status/"):
            self.send(h, int(path.rsplit("/", 1)[1]), b"<html><body>nope</body></html>", "text/html")
        elif path == "/big-declared":
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            h.send_header("Content-Length", str(25 * 1024 * 1024))
            h.end_headers()
            h.wfile.write(b"<html><body>" + b"a" * 1024)
        elif path == "/big-stream":
            self.stream_big(h)
        elif path == "/octet":
            self.send(h, 200, b"\x00\x01\x02" * 100, "application/octet-stream")
        elif path == "/doc.pdf" or path == "/pdf":
            self.send(h, 200, b"%PDF-1.4\n" + b"0" * 100, "application/pdf")
        elif path == "/audio":
            self.send(h, 200, b"ID3" + b"0" * 100, "audio/mpeg")
        elif path == "/empty":
            body = b"<html><head><title>Sign in</title></head><body><p>Please log in.</p></body></html>"
            self.send(h, 200, body, "text/html")
        elif path == "/notes/readme.txt":
            text = "Plain notes.\nLine two with caf\u00e9.\n".encode()
            self.send(h, 200, text, "text/plain; charset=utf-8")
        elif path == "/slow":
            time.sleep(3)
            self.send(h, 200, ARTICLE.encode(), "text/html")
        else:
            self.send(h, 404, b"not here", "text/plain")

    @staticmethod
    def send(h: BaseHTTPRequestHandler, code: int, body: bytes, ctype: str) -> None:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    @staticmethod
    def redirect(h: BaseHTTPRequestHandler, code: int, location: str) -> None:
        h.send_response(code)
        h.send_header("Location", location)
        h.send_header("Content-Length", "0")
        h.end_headers()

    def stream_big(self, h: BaseHTTPRequestHandler) -> None:
        # no Content-Length: the body ends when the connection closes; offer 200 MB
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Connection", "close")
        h.end_headers()
        piece = b"<p>" + b"x" * (64 * 1024 - 7) + b"</p>\n"
        try:
            while self.sent_big < 200 * 1024 * 1024:
                h.wfile.write(piece)
                self.sent_big += len(piece)
        except OSError:
            pass
        finally:
            self.big_done.set()


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


ALLOWED = Outbound(allow_private=True)  # the tests' loopback sites stand in for the web
REFUSED = Outbound()  # the production default: private addresses refused


async def fails(outbound: Outbound, url: str, **kw: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        await fetch_page(outbound, url, **kw)
    assert info.value.status == 400
    assert info.value.code == "ingest_failed"
    return info.value


# --- fetching -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_article_extracts_main_text_not_boilerplate(site: Site) -> None:
    page = await fetch_page(ALLOWED, f"{site.base}/article")
    assert page.url == f"{site.base}/article"
    assert page.content_type == "text/html"
    assert "Fresnel lens" in page.text
    assert "museums where visitors can climb" in page.text
    assert "920 mm" in page.text  # tables are kept
    for boilerplate in ("NAVSHOP", "FOOTERCOPY", "FOOTERPROMO", "About us"):
        assert boilerplate not in page.text
    assert page.title is not None and "How Lighthouses Work" in page.title
    assert page.metadata.get("author") == "Ada Keeper"
    assert page.metadata.get("description") == "A short history of lighthouse optics."
    assert page.metadata.get("hostname") == "127.0.0.1"
    import json

    json.dumps(page.metadata)


@pytest.mark.asyncio
async def test_redirect_chain_is_followed(site: Site) -> None:
    page = await fetch_page(ALLOWED, f"{site.base}/r1")
    assert page.url == f"{site.base}/article?utm_source=x&id=7"
    assert page.canonical == f"{site.base}/article?id=7"
    assert "Fresnel" in page.text


@pytest.mark.asyncio
async def test_redirect_to_other_scheme_is_refused(site: Site) -> None:
    err = await fails(ALLOWED, f"{site.base}/to-file")
    assert "only http and https" in (err.message or "")


@pytest.mark.asyncio
async def test_redirect_loop_is_refused_after_five_hops(site: Site) -> None:
    before = len(site.hits)
    err = await fails(ALLOWED, f"{site.base}/loop0")
    assert "too many redirects" in (err.message or "")
    assert site.hits[before:] == [f"/loop{i}" for i in range(6)]  # the start + 5 redirects, no 7th request


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (404, "page not found (HTTP 404)"),
        (410, "page not found (HTTP 410)"),
        (401, "login required or paywalled (HTTP 401)"),
        (403, "login required or paywalled (HTTP 403)"),
        (500, "server error (HTTP 500)"),
        (418, "HTTP 418"),
    ],
)
async def test_http_errors(site: Site, code: int, expected: str) -> None:
    err = await fails(ALLOWED, f"{site.base}/status/{code}")
    assert expected in (err.message or "")


@pytest.mark.asyncio
async def test_declared_oversize_is_refused(site: Site) -> None:
    err = await fails(ALLOWED, f"{site.base}/big-declared")
    assert err.message == "page larger than 20 MB"


@pytest.mark.asyncio
async def test_streamed_oversize_is_refused_without_reading_everything(site: Site) -> None:
    err = await fails(ALLOWED, f"{site.base}/big-stream")
    assert err.message == "page larger than 20 MB"
    assert site.big_done.wait(10), "server kept streaming after the client gave up"
    assert MAX_BYTES < site.sent_big < 60 * 1024 * 1024  # stopped soon after the cap, far below 200 MB


@pytest.mark.asyncio
async def test_unsupported_content_type(site: Site) -> None:
    err = await fails(ALLOWED, f"{site.base}/octet")
    assert "application/octet-stream" in (err.message or "")
    assert not isinstance(err, UnsupportedMedia)


@pytest.mark.asyncio
async def test_pdf_and_audio_are_routed_as_media(site: Site) -> None:
    with pytest.raises(UnsupportedMedia) as info:
        await fetch_page(ALLOWED, f"{site.base}/pdf")
    assert info.value.kind == "pdf" and info.value.content_type == "application/pdf"
    assert info.value.status == 400 and info.value.code == "ingest_failed"
    assert info.value.message == "PDF/audio/video URLs are not supported yet"
    with pytest.raises(UnsupportedMedia) as info:
        await fetch_page(ALLOWED, f"{site.base}/audio")
    assert info.value.kind == "audio"


@pytest.mark.asyncio
async def test_near_empty_page(site: Site) -> None:
    err = await fails(ALLOWED, f"{site.base}/empty")
    assert err.message == "page has no readable text; it may need a login or be paywalled"


@pytest.mark.asyncio
async def test_plain_text_taken_as_is(site: Site) -> None:
    page = await fetch_page(ALLOWED, f"{site.base}/notes/readme.txt")
    assert page.text == "Plain notes.\nLine two with caf\u00e9."
    assert page.title == "readme.txt"
    assert page.content_type == "text/plain"


@pytest.mark.asyncio
async def test_slow_page_times_out(site: Site) -> None:
    err = await fails(ALLOWED, f"{site.base}/slow", read_timeout=0.3)  # the page answers after 3 s
    assert "did not respond in time" in (err.message or "")
    err = await fails(ALLOWED, f"{site.base}/slow", total_timeout=0.3)
    assert "longer than 0.3 s" in (err.message or "")


@pytest.mark.asyncio
async def test_connection_refused_and_dns_failure() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        err = await fails(ALLOWED, f"http://127.0.0.1:{port}/")
    assert "connection refused" in (err.message or "")
    err = await fails(ALLOWED, "http://no-such-host.invalid/page")
    assert "DNS lookup failed" in (err.message or "")


# --- SSRF guard -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_private_targets_are_refused_before_any_connection(site: Site) -> None:
    before = len(site.hits)
    blocked = [
        f"http://127.0.0.1:{site.port}/article",
        f"http://localhost:{site.port}/article",
        f"http://LOCALHOST:{site.port}/article",
        f"http://2130706433:{site.port}/article",  # decimal 127.0.0.1
        f"http://0x7f.1:{site.port}/article",  # hex/short form
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[2002:7f00:1::]/",  # 6to4 wrapping 127.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 wrapping 169.254.169.254
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",
        "http://0.0.0.0/",
        "http://[fd00::1]/",
        "http://[fe80::1]/",
        "http://224.0.0.1/",
    ]
    for url in blocked:
        err = await fails(REFUSED, url, connect_timeout=0.5)
        why = err.message or ""
        assert "non-public address" in why or "cloud metadata service" in why, (url, why)
        # every refusal says which setting allows it, or that none does (a metadata service)
        assert ("LEV_PRIVATE_URL_ALLOWLIST" in why and "LEV_ALLOW_PRIVATE_URLS" in why) \
            or "no setting allows it" in why, (url, why)
        assert err.code == "ingest_failed"  # an ingest answers it as any unreachable URL
    for url in ("ftp://x/file", "file:///etc/passwd", "gopher://x/"):
        err = await fails(REFUSED, url)
        assert "only http and https" in (err.message or ""), url
    err = await fails(REFUSED, "http://0177.0.0.1/")  # octal form: rejected by the URL parser
    assert "invalid URL" in (err.message or "")
    assert site.hits[before:] == []


@pytest.mark.asyncio
async def test_check_host_resolution() -> None:
    with pytest.raises(ApiError):
        await check_host(REFUSED, "localhost", 80)
    with pytest.raises(ApiError):
        await check_host(REFUSED, "[::1]", 80)
    assert await check_host(REFUSED, "93.184.215.14", 443) == ["93.184.215.14"]
    assert not is_blocked_address("2606:4700::6810:84e5")
    assert not is_blocked_address("8.8.8.8")
    assert is_blocked_address("::ffff:10.1.2.3")
    assert is_blocked_address("fe80::1%eth0")


@pytest.mark.asyncio
async def test_redirect_to_private_address_is_rechecked() -> None:
    """A permitted site redirecting into a forbidden network is refused at the redirect hop.

    With private URLs off, only 127.0.0.1/32 is allow-listed (standing in for a public site); the
    second site listens on 127.0.0.2, which stays forbidden. The first site must be hit, the second
    never, and its address must be named in the refusal.
    """
    outbound = Outbound(allowlist=("127.0.0.1/32",))
    public, internal = Site("127.0.0.1"), Site("127.0.0.2")
    try:
        ok = await fetch_page(outbound, f"{public.base}/article")
        assert "Fresnel" in ok.text
        public.route = lambda h: Site.redirect(h, 302, f"{internal.base}/article")  # type: ignore[method-assign]
        err = await fails(outbound, f"{public.base}/start")
        assert "127.0.0.2" in (err.message or "") and "non-public" in (err.message or "")
        assert public.hits == ["/article", "/start"]
        assert internal.hits == []
        err = await fails(outbound, f"{internal.base}/article")
        assert internal.hits == []
    finally:
        public.close()
        internal.close()


# --- URL helpers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("HTTPS://Example.COM:443/a/b?x=1&utm_source=tw&y=2#frag", "https://example.com/a/b?x=1&y=2"),
        ("http://example.com:80", "http://example.com/"),
        ("http://example.com:8080/p", "http://example.com:8080/p"),
        ("https://example.com:80/p", "https://example.com:80/p"),
        ("https://example.com/p?", "https://example.com/p"),
        ("https://example.com/p?utm_medium=a&UTM_Campaign=b", "https://example.com/p"),
        ("https://example.com/Path/To?q=a%20b&z", "https://example.com/Path/To?q=a%20b&z"),
        ("https://example.com/p?b=2&a=1", "https://example.com/p?b=2&a=1"),
        ("http://[::1]:80/x", "http://[::1]/x"),
    ],
)
def test_canonical_url(raw: str, canonical: str) -> None:
    assert canonical_url(raw) == canonical


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://www.youtube.com/watch?v=dQw4w9WgXcQ", "youtube"),
        ("https://youtube.com/watch?v=abc", "youtube"),
        ("https://m.youtube.com/watch?v=abc", "youtube"),
        ("https://music.youtube.com/watch?v=abc", "youtube"),
        ("https://youtu.be/dQw4w9WgXcQ", "youtube"),
        ("https://www.youtube.com/shorts/abc123", "youtube"),
        ("https://www.youtube.com/@channel", None),
        ("https://example.com/paper.PDF", "pdf"),
        ("https://example.com/a/talk.mp3?x=1", "audio"),
        ("https://example.com/a/clip.webm", "video"),
        ("https://example.com/a/clip.mkv", "video"),
        ("https://example.com/notes.html", None),
        ("https://example.com/dir.pdf/page", None),
    ],
)
def test_classify_media_url(url: str, kind: str | None) -> None:
    assert classify_media_url(url) == kind


@pytest.mark.parametrize("url", [
    "https://youtube.com/watch?v=dQw4w9WgXcQ",
    "https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42s",
    "https://m.youtube.com/watch?v=dQw4w9WgXcQ",
    "https://music.youtube.com/watch?v=dQw4w9WgXcQ",
    "https://www.youtube-nocookie.com/embed/dQw4w9WgXcQ",
    "https://youtube-nocookie.com/embed/dQw4w9WgXcQ?start=10",
    "https://youtu.be/dQw4w9WgXcQ",
    "https://www.youtube.com/shorts/dQw4w9WgXcQ",
    "https://www.youtube.com/live/dQw4w9WgXcQ",
    "https://www.youtube.com/v/dQw4w9WgXcQ",
])
def test_every_youtube_link_form_is_routed_to_youtube(url: str) -> None:
    """One host list: URL ingest routes every form to the YouTube path, which reads the same video from it."""
    from lev.ingest import youtube

    assert classify_media_url(url) == "youtube"
    assert youtube.canonical_url(url) == "https://www.youtube.com/watch?v=dQw4w9WgXcQ"
