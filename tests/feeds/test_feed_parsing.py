"""Reading feeds without a server: RSS 1.0 (RDF), a JSON Feed podcast, entries newest first whatever the order,
a page naming its feed, and OPML's folders and refusals."""

from __future__ import annotations

import pytest

from lev.core.errors import ApiError
from lev.feeds import opml
from lev.feeds.parse import Fetched, alternates, parse, why_not

RDF = b"""<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
         xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="https://example.org/"><title>RDF site</title><link>https://example.org/</link></channel>
  <item rdf:about="https://example.org/old"><title>Old</title><link>https://example.org/old</link>
    <dc:date>2024-01-01T00:00:00Z</dc:date></item>
  <item rdf:about="https://example.org/new"><title>New</title><link>/new</link>
    <dc:date>2025-01-01T00:00:00Z</dc:date></item>
</rdf:RDF>"""


def test_rss_1_0_is_read_newest_first_with_links_made_absolute() -> None:
    feed = parse(RDF, "application/rdf+xml", "https://example.org/feed.rdf")
    assert feed is not None and feed.title == "RDF site"
    assert [(e.title, e.url) for e in feed.entries] == [("New", "https://example.org/new"),
                                                        ("Old", "https://example.org/old")]


def test_a_json_feed_podcast_takes_its_audio_and_html_is_not_a_feed() -> None:
    body = (b'{"version": "https://jsonfeed.org/version/1", "title": "Pod", "items": [{"id": "e1", '
            b'"url": "https://pod.example/e1", "title": "Episode 1", "attachments": [{"url": '
            b'"https://cdn.example/e1.mp3", "mime_type": "audio/mpeg"}]}, {"id": "e2", "content_text": "no link"}]}')
    feed = parse(body, "application/feed+json", "https://pod.example/feed.json")
    assert feed is not None
    assert [(e.guid, e.url) for e in feed.entries] == [("e1", "https://cdn.example/e1.mp3"), ("e2", None)]
    assert parse(b"<!doctype html><html><body>hi</body></html>", "text/html", "https://x.example/") is None
    assert parse(b'{"version": "1"}', "application/json", "https://x.example/") is None


def test_a_page_names_its_feeds() -> None:
    page = (b"<html><head><link rel='stylesheet' href='/s.css'><link rel='alternate' type='application/atom+xml' "
            b"href='/atom.xml'><link rel='alternate' type='text/html' href='/fr/'></head></html>")
    assert alternates(page, "https://blog.example/post/1") == ["https://blog.example/atom.xml"]


def test_opml_folders_and_refusals() -> None:
    found = opml.parse(b"<opml version='2.0'><body><outline text='A'><outline text='B'>"
                       b"<outline xmlUrl='https://f.example/1' title='One'/></outline></outline>"
                       b"<outline xmlUrl='https://f.example/2'/></body></opml>")
    assert [(o.url, o.title, o.folder) for o in found] == [("https://f.example/1", "One", "A / B"),
                                                           ("https://f.example/2", None, None)]
    with pytest.raises(ApiError) as refused:
        opml.parse(b'<!DOCTYPE x [<!ENTITY a "aaaa">]><opml/>')
    assert refused.value.code == "invalid_body" and refused.value.extra["line"] == 1


OPML_DTD = """<?xml version="1.0" encoding="{enc}"?>
<!-- {pad} -->
<!DOCTYPE opml [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>
<opml version="2.0"><body><outline text="&b;" xmlUrl="https://example.org/feed"/></body></opml>"""


@pytest.mark.parametrize("encoding,pad", [("UTF-8", 200_000), ("UTF-16", 0), ("UTF-16", 200_000)])
def test_opml_entity_declarations_are_refused_anywhere_in_any_encoding(encoding: str, pad: int) -> None:
    """Issue 38 item 5: the old rule scanned the first 100 KB of raw bytes, so a DTD after a long comment or in a
    UTF-16 file had its entities expanded."""
    data = OPML_DTD.format(enc=encoding, pad="x" * pad).encode(encoding.lower())
    with pytest.raises(ApiError) as caught:
        opml.parse(data)
    assert caught.value.code == "invalid_body" and "declares XML entities" in (caught.value.message or "")
    assert caught.value.extra["line"] == 3


def test_a_utf16_opml_without_entities_is_read() -> None:
    data = ('<?xml version="1.0" encoding="UTF-16"?><opml version="2.0"><body><outline text="Tech">'
            '<outline text="Blog" xmlUrl="https://example.org/feed"/></outline></body></opml>').encode("utf-16")
    assert [(o.url, o.folder) for o in opml.parse(data)] == [("https://example.org/feed", "Tech")]


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_a_feed_that_declares_entities_is_not_a_feed(encoding: str) -> None:
    doc = (f'<?xml version="1.0" encoding="{encoding}"?><!-- {"x" * 200_000} --><!DOCTYPE rss [<!ENTITY x "BOOM">]>'
           '<rss version="2.0"><channel><title>t &x;</title><item><title>a &x;</title><link>http://e.com/a</link>'
           '</item></channel></rss>').encode(encoding)
    assert parse(doc, "application/rss+xml", "http://e.com/feed") is None
    assert "declares XML entities (line 1)" in why_not(Fetched(200, "http://e.com/feed", doc, "application/rss+xml"))
    plain = doc.replace('<!DOCTYPE rss [<!ENTITY x "BOOM">]>'.encode(encoding), b"").replace(
        "&x;".encode(encoding), b"")
    if encoding == "utf-8":  # the same feed without its DTD is read
        feed = parse(plain, "application/rss+xml", "http://e.com/feed")
        assert feed is not None and [e.url for e in feed.entries] == ["http://e.com/a"]


def _rss(items: bytes) -> bytes:
    return (b"<?xml version='1.0'?><rss version='2.0'><channel><title>Big</title><link>https://big.example/</link>"
            + items + b"</channel></rss>")


def test_an_authors_long_text_is_read_in_linear_time() -> None:
    """Issue 47 item 1: feedparser looked for an author's e-mail address with a pattern quadratic in the text: a
    16,000-character author took 5-20 s (the GIL held), and a feed of them held a reader for hours. 60,000
    characters now take milliseconds, and an ordinary author's address is still found."""
    import time

    import feedparser

    for author in (b"a@" + b"a" * 60_000, b"-" * 60_000 + b"@", b"x@" + b"a." * 30_000):
        body = _rss(b"<item><title>t</title><link>https://big.example/1</link><author>" + author + b"</author>"
                    b"<dc:creator xmlns:dc='http://purl.org/dc/elements/1.1/'>" + author + b"</dc:creator></item>")
        started = time.monotonic()
        feed = parse(body, "application/rss+xml", "https://big.example/feed")
        assert time.monotonic() - started < 5
        assert feed is not None and len(feed.entries) == 1
    item = feedparser.parse(_rss(b"<item><title>t</title><link>https://big.example/1</link>"
                                 b"<author>jo@example.com (Jo Smith)</author></item>")).entries[0]
    assert item.author_detail == {"name": "Jo Smith", "email": "jo@example.com"}


def test_a_large_feed_is_glanced_at_and_read_whole_on_demand() -> None:
    """Issue 47 item 7: a follow reads at most GLANCE_BYTES of a feed (its first entries tell it is one); the poll
    reads it whole. What is not a feed is refused either way, entity declarations anywhere included."""
    from lev.feeds.parse import GLANCE_BYTES, examine

    items = b"".join(b"<item><title>Entry %d</title><link>https://big.example/%d</link></item>" % (n, n)
                     for n in range(4_000))
    body = _rss(items)
    assert len(body) > GLANCE_BYTES
    fetched = Fetched(200, "https://big.example/feed", body, "application/rss+xml")
    glanced = examine(fetched, whole=False)
    assert glanced.partial and glanced.feed is not None and glanced.feed.entries == []
    assert (glanced.feed.title, glanced.feed.site_url) == ("Big", "https://big.example/")
    whole = examine(fetched)
    assert not whole.partial and whole.feed is not None and len(whole.feed.entries) == 4_000
    small = examine(Fetched(200, "https://big.example/feed", _rss(items[:2000]), "application/rss+xml"), whole=False)
    assert not small.partial and small.feed is not None and len(small.feed.entries) > 10
    entity = b"<?xml version='1.0'?><!DOCTYPE rss [<!ENTITY e 'x'>]>" + body[len(b"<?xml version='1.0'?>"):]
    refused = examine(Fetched(200, "https://big.example/feed", entity, "application/rss+xml"), whole=False)
    assert refused.feed is None and "declares XML entities" in refused.why_not
    sitemap = b"<?xml version='1.0'?><urlset>" + b"<url><loc>https://big.example/</loc></url>" * 7_000 + b"</urlset>"
    assert examine(Fetched(200, "https://big.example/map", sitemap, "application/xml"), whole=False).feed is None
    json_body = (b'{"version": "https://jsonfeed.org/version/1.1", "title": "Jay", "home_page_url": '
                 b'"https://big.example/", "items": [' + b",".join(
                     b'{"id": "%d", "url": "https://big.example/%d"}' % (n, n) for n in range(8_000)) + b"]}")
    jay = examine(Fetched(200, "https://big.example/j", json_body, "application/feed+json"), whole=False)
    assert jay.partial and jay.feed is not None and jay.feed.title == "Jay"
