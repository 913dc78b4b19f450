"""Loopback stand-ins for feeds and webhooks: a feed site speaking RSS 2.0, RSS 0.91, Atom and JSON Feed with
conditional GET (ETag, Last-Modified), a site page naming its feed, articles and podcast audio; and a webhook
receiver that records every delivery and answers as a test tells it (status codes in turn, a delay)."""

from __future__ import annotations

import io
import json
import select
import socket
import threading
import time
import wave
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from xml.sax.saxutils import escape

from tests.sites import article_html, generated_article

BASE_DATE = datetime(2026, 1, 1, 8, 0, tzinfo=UTC)


@dataclass
class FeedEntry:
    n: int
    guid: str | None = None  # None: the entry has none (its link stands in)
    audio: bool = False
    slow: float = 0.0  # seconds its article takes to answer
    content: str | None = None  # the entry's own text (HTML) in the feed
    short: bool = False  # its link is a page of one short line (under the 200 characters a fetched page needs)

    @property
    def date(self) -> datetime:
        return BASE_DATE + timedelta(hours=self.n)


@dataclass
class FeedSpec:
    fmt: str  # rss, rss091, atom, json
    title: str
    entries: list[FeedEntry] = field(default_factory=list)
    status: int = 200
    version: int = 0  # bumped on every change: the ETag and Last-Modified follow it
    validators: bool = True  # False: a server that sends no ETag or Last-Modified (every check is a 200)


def _wav(seconds: float = 1.0) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x10" * int(8000 * seconds))
    return buf.getvalue()


class FeedSite:
    """A feed server on 127.0.0.1: `/feeds/<name>` per FeedSpec, `/site/<name>` a page naming it, `/a/<n>`
    articles, `/audio/<n>.wav` podcast episodes; `hits` logs (path, status, If-None-Match)."""

    def __init__(self) -> None:
        self.feeds: dict[str, FeedSpec] = {}
        self.hits: list[tuple[str, int, str | None]] = []  # answered: (path, status, If-None-Match)
        self.arrived: list[str] = []  # requested (before a slow answer)
        self.dripping = self.most_dripping = 0  # /drip/ answers being sent now, and the most at once
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                with site.lock:
                    site.arrived.append(self.path)
                if self.path.startswith("/drip/"):  # /drip/<seconds>/<name>: a feed sent a few bytes at a time
                    _, _, seconds, name = self.path.split("/", 3)
                    body, ctype = site.rss(site.feeds[name])
                    self.send_response(200)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    pieces = 50
                    step = -(-len(body) // pieces)
                    with site.lock:
                        site.dripping += 1
                        site.most_dripping = max(site.most_dripping, site.dripping)
                    try:
                        for n in range(pieces):
                            self.wfile.write(body[n * step:(n + 1) * step])
                            self.wfile.flush()
                            # wait for the next piece, or notice at once that the client hung up
                            if select.select([self.connection], [], [], float(seconds) / pieces)[0] and \
                                    not self.connection.recv(1, socket.MSG_PEEK):
                                break
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    finally:
                        with site.lock:
                            site.dripping -= 1
                    return
                status, body, ctype, headers = site.answer(self.path, dict(self.headers.items()))
                with site.lock:
                    site.hits.append((self.path, status, self.headers.get("If-None-Match")))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()

    def add(self, name: str, fmt: str, entries: list[FeedEntry], title: str | None = None) -> str:
        self.feeds[name] = FeedSpec(fmt, title or f"Feed {name}", list(entries))
        return f"{self.url}/feeds/{name}"

    def publish(self, name: str, *entries: FeedEntry) -> None:
        spec = self.feeds[name]
        spec.entries = [*entries, *spec.entries]
        spec.version += 1

    def count(self, path: str, status: int | None = None) -> int:
        with self.lock:
            return sum(1 for p, s, _ in self.hits if p == path and (status is None or s == status))

    # -------------------------------------------------------------------------------------------- answers

    def link(self, e: FeedEntry) -> str:
        if e.short:
            return f"{self.url}/short/{e.n}"
        return f"{self.url}/a/{e.n}" + (f"?slow={e.slow}" if e.slow else "")

    def answer(self, raw: str, headers: dict[str, str]) -> tuple[int, bytes, str, dict[str, str]]:
        path, _, query = raw.partition("?")
        params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
        if path.startswith("/feeds/") and path[7:] in self.feeds:
            return self.feed(self.feeds[path[7:]], headers)
        if path.startswith("/site/") and path[6:] in self.feeds:
            page = (f"<!doctype html><html><head><title>Site {path[6:]}</title><link rel='alternate' "
                    f"type='application/rss+xml' title='RSS' href='/feeds/{path[6:]}'></head><body><p>Hello"
                    "</p></body></html>")
            return 200, page.encode(), "text/html; charset=utf-8", {}
        if path.startswith("/a/") and path[3:].isdigit():
            if "slow" in params:
                time.sleep(float(params["slow"]))
            return 200, article_html(*generated_article(int(path[3:]))), "text/html; charset=utf-8", {}
        if path.startswith("/short/"):
            page = f"<!doctype html><html><head><title>Post</title></head><body><p>Post {path[7:]}.</p></body></html>"
            return 200, page.encode(), "text/html; charset=utf-8", {}
        if path.startswith("/audio/") and path.endswith(".wav"):
            return 200, _wav(), "audio/wav", {}
        if path == "/plain":
            return 200, article_html(*generated_article(1)), "text/html; charset=utf-8", {}
        if path == "/garbage.xml":
            return 200, b"<?xml version='1.0'?>\n<rss><channel><title>x</title>\n<item><oops></channel>", \
                "application/xml", {}
        if path == "/huge.xml":
            head = b"<?xml version='1.0'?><rss version='2.0'><channel><title>Huge</title>"
            return 200, head + b"<!-- " + b"x" * (20 * 1024 * 1024) + b" --></channel></rss>", \
                "application/rss+xml", {}
        return 404, b"not here", "text/plain", {}

    def feed(self, spec: FeedSpec, headers: dict[str, str]) -> tuple[int, bytes, str, dict[str, str]]:
        if spec.status != 200:
            return spec.status, b"down", "text/plain", {}
        etag = f'"v{spec.version}"'
        modified = format_datetime(BASE_DATE + timedelta(days=spec.version), usegmt=True)
        validators = {"ETag": etag, "Last-Modified": modified} if spec.validators else {}
        if spec.validators and headers.get("If-None-Match") == etag:
            return 304, b"", "application/rss+xml", validators
        render = {"rss": self.rss, "rss091": self.rss091, "atom": self.atom, "json": self.json_feed}[spec.fmt]
        body, ctype = render(spec)
        return 200, body, ctype, validators

    def rss(self, spec: FeedSpec) -> tuple[bytes, str]:
        items = "".join(
            f"<item><title>{escape(generated_article(e.n)[0])}</title><link>{escape(self.link(e))}</link>"
            + (f"<guid isPermaLink='false'>{escape(e.guid)}</guid>" if e.guid else "")
            + f"<pubDate>{format_datetime(e.date, usegmt=True)}</pubDate>"
            + (f"<description>{escape(e.content)}</description>" if e.content else "")
            + (f"<enclosure url='{self.url}/audio/{e.n}.wav' length='16044' type='audio/wav'/>" if e.audio else "")
            + "</item>" for e in spec.entries)
        return (f"<?xml version='1.0' encoding='UTF-8'?><rss version='2.0'><channel><title>{escape(spec.title)}"
                f"</title><link>{self.url}/</link><description>d</description>{items}</channel></rss>").encode(), \
            "application/rss+xml; charset=utf-8"

    def rss091(self, spec: FeedSpec) -> tuple[bytes, str]:
        items = "".join(f"<item><title>{escape(generated_article(e.n)[0])}</title><link>{escape(self.link(e))}"
                        "</link></item>" for e in spec.entries)
        return (f"<?xml version='1.0'?><rss version='0.91'><channel><title>{escape(spec.title)}</title>"
                f"<link>{self.url}/</link><description>d</description><language>en</language>{items}</channel>"
                "</rss>").encode(), "text/xml"

    def atom(self, spec: FeedSpec) -> tuple[bytes, str]:
        entries = "".join(
            f"<entry><title>{escape(generated_article(e.n)[0])}</title><link rel='alternate' "
            f"href='{escape(self.link(e))}'/><id>{escape(e.guid or self.link(e))}</id>"
            f"<updated>{e.date.isoformat()}</updated>"
            + (f"<content type='html'>{escape(e.content)}</content>" if e.content else "")
            + "</entry>" for e in spec.entries)
        return (f"<?xml version='1.0' encoding='utf-8'?><feed xmlns='http://www.w3.org/2005/Atom'><title>"
                f"{escape(spec.title)}</title><id>urn:lev:test</id><updated>{BASE_DATE.isoformat()}</updated>"
                f"{entries}</feed>").encode(), "application/atom+xml"

    def json_feed(self, spec: FeedSpec) -> tuple[bytes, str]:
        doc: dict[str, Any] = {"version": "https://jsonfeed.org/version/1.1", "title": spec.title,
                               "home_page_url": f"{self.url}/", "items": [
                                   {"id": e.guid or self.link(e), "url": self.link(e),
                                    "title": generated_article(e.n)[0], "date_published": e.date.isoformat(),
                                    **({"content_html": e.content} if e.content else {})}
                                   for e in spec.entries]}
        return json.dumps(doc).encode(), "application/feed+json"


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # many deliveries may connect at once (the default backlog of 5 would delay them)


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes
    at: float


class WebhookReceiver:
    """A webhook endpoint on 127.0.0.1 recording each POST; `statuses` are answered in turn (then 200)."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.statuses: list[int] = []
        self.delay = 0.0
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.cond:
                    receiver.deliveries.append(Delivery({k.lower(): v for k, v in self.headers.items()}, body,
                                                        time.time()))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    delay = receiver.delay
                    receiver.cond.notify_all()
                if delay:
                    time.sleep(delay)
                answer = b'{"ok": true}' if status < 300 else b"receiver says no " + b"x" * 3000
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    if 300 <= status < 400:
                        self.send_header("Location", "/elsewhere")
                    self.end_headers()
                    self.wfile.write(answer)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()

    def events(self) -> list[dict[str, Any]]:
        with self.cond:
            return [json.loads(d.body) for d in self.deliveries]

    def wait_for(self, pred: Any, timeout: float = 60) -> list[Delivery]:
        """Wait until `pred(deliveries)` holds; the deliveries."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self.deliveries):
                left = deadline - time.monotonic()
                assert left > 0, [json.loads(d.body)["type"] for d in self.deliveries]
                self.cond.wait(left)
            return list(self.deliveries)
