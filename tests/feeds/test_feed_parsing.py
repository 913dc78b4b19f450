"""Reading feeds without a server: RSS 1.0 (RDF), a JSON Feed podcast, entries newest first whatever the order,
a page naming its feed, and OPML's folders and refusals."""

from __future__ import annotations

import pytest

from lev.core.errors import ApiError
from lev.feeds import opml
from lev.feeds.parse import alternates, parse

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
