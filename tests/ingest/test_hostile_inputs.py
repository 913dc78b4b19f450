"""The ingest side's inputs at their worst (issue 47 item 1, the ingest and feeds pass): a page's title found in
one pass, a declared charset never decoded by a quadratic codec nor taken for a 500, captions with unclosed tags
read in one pass and off the event loop, a huge text page cut to what a note may hold and decoded off the loop,
vectors bound in pgvector's binary form."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from lev.core.charsets import text_codec
from lev.ingest import webpage
from lev.ingest.youtube import caption_segments
from lev.plumbing import offload
from lev.plumbing.ports import Outbound


def test_a_pages_title_is_found_in_one_pass() -> None:
    """The <title> pattern searched from every `<title`: 9,000 unclosed ones (63 KB, run on a thread of the
    server) held the event loop 3-24 s, 200,000 characters of them a reader for minutes."""
    head = "<title>" * 28_000
    started = time.monotonic()
    assert webpage.page_title(head) is None
    assert time.monotonic() - started < 1
    assert webpage.page_title("<html><HEAD><Title lang=en>Tides &amp; pools\n</title ></head>") == "Tides & pools"
    assert webpage.page_title("<title>unclosed") is None


def test_a_declared_charset_is_a_one_pass_text_encoding_or_utf8() -> None:
    for declared, used in (("UTF-8", "utf-8"), ("latin1", "iso8859-1"), ('"shift_jis"', "shift_jis"),
                           ("punycode", "utf-8"), ("IDNA", "utf-8"), ("zlib", "utf-8"), ("no-such", "utf-8"),
                           ("base64", "utf-8"), ("", "utf-8"), (None, "utf-8")):
        assert text_codec(declared) == used, declared
    started = time.monotonic()  # punycode decoding is quadratic: 80,000 bytes took 10-30 s
    assert webpage.plain_text(b"x" * 80_000 + b"-" + b"ba" * 40_000, "punycode")[1] == 160_001
    assert time.monotonic() - started < 5


def test_captions_with_unclosed_tags_are_read_in_one_pass() -> None:
    """The tag pattern `<[^>]*>` searched from every `<` of a line: 200,000 of them never finished."""
    body = b"WEBVTT\n\n00:00.000 --> 00:02.000\n" + b"<" * 200_000 + b"\n\n00:02.000 --> 00:03.000\n<b>Hi</b>\n"
    started = time.monotonic()
    segments = caption_segments(body, "utf-8", "vtt")
    assert time.monotonic() - started < 5
    assert segments[-1] == {"start": 2.0, "end": 3.0, "text": "Hi"}
    assert caption_segments(b"{not json", None, "json3") == []


class _Plain(BaseHTTPRequestHandler):
    body = b""
    ctype = ""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        self.send_response(200)
        self.send_header("Content-Type", type(self).ctype)
        self.send_header("Content-Length", str(len(type(self).body)))
        self.end_headers()
        self.wfile.write(type(self).body)


@pytest.fixture
def plain_site() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Plain)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/notes.txt"
    httpd.shutdown()


def test_a_huge_text_page_is_decoded_off_the_event_loop_and_kept_to_a_notes_size(plain_site: str) -> None:
    """A 20 MB text/plain page was decoded and stripped on the event loop and kept whole (20 million
    characters); an unknown charset was a LookupError (500)."""
    offload.configure(2, 0)
    _Plain.body = (b"\xff\xfe words " * 2_000_000)[:20_000_000]

    async def fetch(ctype: str) -> tuple[webpage.FetchedPage, float]:
        _Plain.ctype = ctype
        worst, done = 0.0, asyncio.Event()

        async def watch() -> None:
            nonlocal worst
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.01)
                worst, last = max(worst, time.monotonic() - last), time.monotonic()

        watcher = asyncio.ensure_future(watch())
        try:
            page = await webpage.fetch_page(Outbound(allow_private=True), plain_site, total_timeout=120)
        finally:
            done.set()
            await watcher
        return page, worst

    try:
        page, worst = asyncio.run(fetch("text/plain; charset=utf-8"))
        assert len(page.text) <= webpage.MAX_TEXT_CHARS and page.metadata["text_cut_from_chars"] > 10_000_000
        assert worst < 5, worst  # a loaded machine's scheduler alone makes gaps of a second
        page, _ = asyncio.run(fetch("text/plain; charset=zlib"))  # not a text encoding: read as UTF-8
        assert page.text.startswith("\ufffd\ufffd words")
    finally:
        offload.shutdown()


def test_vectors_are_bound_in_binary() -> None:
    """pgvector's type wrote each float's repr in Python: 2,500 vectors (a 1,000,000-character note) took about a
    second of the event loop (10 s on a loaded machine). The binary form is NumPy's bytes."""
    from lev.store.models import chunks
    from lev.store.vectors import VectorBytes

    bind = chunks.c.embedding.type.bind_processor(None)
    vectors = np.random.default_rng(1).random((2_500, 384), dtype=np.float32)
    started = time.monotonic()
    bound = [bind(v) for v in vectors]
    took = time.monotonic() - started
    assert all(isinstance(b, VectorBytes) and len(b) == 4 + 384 * 4 for b in bound)
    assert np.array_equal(np.frombuffer(bound[7][4:], dtype=">f4"), vectors[7])
    assert bind(vectors[0].tolist()) == bound[0] and bind(None) is None
    assert took < 1.0, took
