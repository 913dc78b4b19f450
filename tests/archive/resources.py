"""A loopback web site for the archived-copy tests: pages and the images and style sheets they name, answered from
a table (status, type, body, delay), every request logged, how many were in flight at once counted."""

from __future__ import annotations

import io
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from PIL import Image


def image(fmt: str, size: tuple[int, int] = (4, 4), color: tuple[int, int, int] = (20, 120, 200)) -> bytes:
    """A real image file of that format (PNG, GIF, JPEG)."""
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, fmt)
    return out.getvalue()


PNG, GIF = image("PNG"), image("GIF", color=(200, 80, 20))


class ResourceSite:
    """`routes[path] = (status, content type, body, delay seconds)`; anything else is 404."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.routes: dict[str, tuple[int, str, bytes, float]] = {}
        self.hits: list[str] = []
        self.in_flight = 0
        self.most_at_once = 0
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                with site.lock:
                    site.hits.append(self.path)
                    site.in_flight += 1
                    site.most_at_once = max(site.most_at_once, site.in_flight)
                try:
                    status, ctype, body, delay = site.routes.get(self.path, (404, "text/plain", b"no", 0.0))
                    if delay:
                        time.sleep(delay)
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    if 300 <= status < 400:
                        self.send_header("Location", body.decode())
                    self.end_headers()
                    try:
                        self.wfile.write(body)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                finally:
                    with site.lock:
                        site.in_flight -= 1

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def add(self, path: str, body: bytes, ctype: str = "text/html; charset=utf-8", status: int = 200,
            delay: float = 0.0) -> str:
        self.routes[path] = (status, ctype, body, delay)
        return self.url + path

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ResourceSite:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()


HOSTILE = """<!doctype html><html><head><meta charset="utf-8"><title>A hostile page</title>
<meta http-equiv="refresh" content="0;url={beacon}/refresh">
<base href="{beacon}/base/">
<link rel="stylesheet" href="/style.css">
<link rel="preload" href="{beacon}/preload" as="image"><link rel="icon" href="{beacon}/icon.png">
<script>window.__lev_pwned = 1; fetch("{beacon}/script");</script>
<script src="{beacon}/external.js"></script>
<style>@import url("{beacon}/imported-by-style.css"); .hero {{ background: url("/dot.png") }}</style>
</head>
<body onload="fetch('{beacon}/onload')">
<h1 class="hero" style="border-image: url('{beacon}/border.png') 30">Tide pools at low water</h1>
<p onclick="fetch('{beacon}/onclick')">Anemones, hermit crabs and sea stars survive twice-daily exposure to air in
the pools between the high and low water marks, and the ochre sea star pries mussels open with its tube feet.</p>
<img src="/dot.png" alt="a dot" onerror="fetch('{beacon}/onerror')" srcset="{beacon}/dot-2x.png 2x">
<img src="{beacon}/tracker.gif" alt="tracker" data-x="1">
<a href="javascript:fetch('{beacon}/js-link')">a script link</a> <a href="/about" target="_blank">About us</a>
<iframe src="{beacon}/frame" srcdoc="&lt;script&gt;parent.__lev_pwned=2&lt;/script&gt;"></iframe>
<form action="{beacon}/form" method="post"><input name="q" autofocus onfocus="fetch('{beacon}/onfocus')">
<button formaction="{beacon}/formaction">Send</button></form>
<svg onload="fetch('{beacon}/svg')"><script>fetch("{beacon}/svg-script")</script>
<a href="javascript:fetch('{beacon}/svg-link')"><text y="20">svg link</text></a></svg>
<object data="{beacon}/object.swf"></object><embed src="{beacon}/embed.swf">
<video src="{beacon}/video.mp4" poster="{beacon}/poster.png" autoplay></video>
<audio src="{beacon}/audio.mp3" autoplay></audio>
<math><mtext><a href="javascript:fetch('{beacon}/math')">math</a></mtext></math>
<noscript><p>This page works without scripts too.</p></noscript>
</body></html>"""

STYLE = b"""@import "/more.css";
@font-face { font-family: "Pools"; src: url("/font.woff2") format("woff2"); }
body { background: #eef url("dot.gif") repeat; font-family: Pools, serif }
"""
MORE = b"h1 { color: #034; background-image: url(/dot.png) }"


def hostile_site(site: ResourceSite, beacon: ResourceSite) -> str:
    """The hostile page on `site` (its resources there too), every script or stray load aimed at `beacon`."""
    site.add("/style.css", STYLE, "text/css")
    site.add("/more.css", MORE, "text/css")
    site.add("/dot.png", PNG, "image/png")
    site.add("/dot.gif", GIF, "image/gif")
    site.add("/font.woff2", b"wOF2" + b"\0" * 100, "font/woff2")
    return site.add("/hostile", HOSTILE.format(beacon=beacon.url).encode())
