"""A folder's public page and its Atom feed: published by its owner at an unguessable URL, read signed out,
`noindex`, excerpts only, newest first and at most 100 entries, a rate limit per page, and 404 the moment it is
turned off."""

from __future__ import annotations

import math
import string
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import feedparser
import httpx
import pytest

from lev.sharing import public
from tests.sharing.test_sharing_api import err, note, ok, share
from tests.stack import Admin, LiveServer, new_user

LONG = " ".join(f"word{i}" for i in range(400))


def test_an_excerpt_is_short_and_cut_between_words() -> None:
    assert public.excerpt("  a\n\nshort   note ") == "a short note"
    cut = public.excerpt(LONG)
    assert len(cut) <= public.EXCERPT_CHARS and cut.endswith("…") and cut[:-1] in LONG
    assert not cut[:-1].endswith("word")  # whole words only


def test_the_feed_is_atom_newest_first_with_every_entry_linked() -> None:
    now = datetime(2026, 11, 1, tzinfo=UTC)
    entries = [public.Entry(str(uuid.uuid4()), f"T <{n}> & co", "https://example.com/a" if n % 2 else None, "text",
                            now - timedelta(days=n), now - timedelta(hours=n), "excerpt") for n in range(3)]
    pub = public.Published("s" * 32, "Reading & list", "http://h/p/s", "http://h/p/s/feed.atom", entries)
    parsed = feedparser.parse(public.atom(pub, now))
    assert not parsed.bozo and parsed.version == "atom10"
    assert parsed.feed.title == "Reading & list" and parsed.feed.id == "http://h/p/s"
    assert [e.title for e in parsed.entries] == ["T <0> & co", "T <1> & co", "T <2> & co"]
    assert parsed.entries[0].link == f"http://h/p/s#item-{entries[0].id}"
    assert parsed.entries[1].link == "https://example.com/a"
    assert parsed.entries[0].id == f"urn:uuid:{entries[0].id}" and parsed.entries[0].summary == "excerpt"


def test_publish_read_signed_out_and_turn_off(api, admin: Admin, server) -> None:
    owner, member = new_user(admin), new_user(admin)
    folder = owner.folder("Newsletter sources")
    o = api(owner.token(write=True, kb_only=False))
    m = api(member.token(write=True, kb_only=False))
    share(o, folder, member, m, "editor")
    first = note(o, "First " + LONG, "First source", folder)
    second = note(m, "Second source, added by a member.", "Second source", folder)
    note(o, "A private note not in the folder.", "Not published")

    err(o.get(f"/api/v1/folders/{folder}/publication"), 404, "not_found")
    pub = ok(o.put(f"/api/v1/folders/{folder}/publication"))
    assert set(pub) == {"url", "feed_url", "created_at"} and pub["feed_url"] == pub["url"] + "/feed.atom"
    assert ok(o.put(f"/api/v1/folders/{folder}/publication")) == pub  # publishing twice keeps the URL
    assert ok(m.get(f"/api/v1/folders/{folder}/publication")) == pub
    slug = pub["url"].rsplit("/p/", 1)[1]
    assert pub["url"] == f"{server.url}/p/{slug}"
    alphabet = string.ascii_letters + string.digits + "-_"
    assert set(slug) <= set(alphabet) and len(slug) * math.log2(len(alphabet)) >= 128

    anon = httpx.Client(base_url=server.url, timeout=60)  # no account, no cookie, no token
    page = anon.get(f"/p/{slug}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "noindex" in page.headers["x-robots-tag"]
    assert '<meta name="robots" content="noindex' in page.text
    assert "Newsletter sources" in page.text and "First source" in page.text and "Second source" in page.text
    assert "Not published" not in page.text and "word399" not in page.text and "word3 " in page.text
    assert page.text.index("Second source") < page.text.index("First source")  # newest first
    feed = anon.get(f"/p/{slug}/feed.atom")
    assert feed.status_code == 200 and feed.headers["content-type"].startswith("application/atom+xml")
    assert "noindex" in feed.headers["x-robots-tag"]
    parsed = feedparser.parse(feed.content)
    assert not parsed.bozo and parsed.version == "atom10" and parsed.feed.title == "Newsletter sources"
    assert [e.id for e in parsed.entries] == [f"urn:uuid:{second}", f"urn:uuid:{first}"]
    assert "word399" not in feed.text and len(parsed.entries[1].summary) <= public.EXCERPT_CHARS
    assert slug not in "".join(r[0] or "" for r in admin.sql("SELECT method FROM activity WHERE method LIKE '%/p/%'"))

    err(m.delete(f"/api/v1/folders/{folder}/publication"), 403, "forbidden_scope")
    assert ok(o.delete(f"/api/v1/folders/{folder}/publication"), 204) is None
    assert anon.get(f"/p/{slug}").status_code == 404
    assert anon.get(f"/p/{slug}/feed.atom").status_code == 404
    assert "noindex" in anon.get(f"/p/{slug}").headers["x-robots-tag"]
    err(o.get(f"/api/v1/folders/{folder}/publication"), 404, "not_found")
    assert ok(o.delete(f"/api/v1/folders/{folder}/publication"), 204) is None
    again = ok(o.put(f"/api/v1/folders/{folder}/publication"))
    assert again["url"] != pub["url"]  # a new URL: the old one stays dead
    assert anon.get(f"/p/{slug}").status_code == 404
    assert anon.get(again["url"]).status_code == 200
    ok(o.delete(f"/api/v1/folders/{folder}"))
    assert anon.get(again["url"]).status_code == 404  # a deleted folder's page is gone with it
    assert anon.get("/p/short").status_code == 404


def test_at_most_100_entries(api, admin: Admin, server) -> None:
    owner = new_user(admin)
    folder = owner.folder("Big list")
    content = str(uuid.uuid4())
    admin.sql("INSERT INTO contents (id, kind, title, text, status, metadata) VALUES (:c, 'text', 't', 'x', 'ready', "
              "'{}')", c=content)
    admin.sql("INSERT INTO user_items (id, user_id, content_id, kind, title, in_kb, archived, status, "
              "transcription_status, auto_transform, metadata) SELECT gen_random_uuid(), :u, :c, 'text', "
              "'Entry ' || n, true, false, 'ready', 'not_required', false, '{}' FROM generate_series(1, 105) n",
              u=owner.id, c=content)
    admin.sql("INSERT INTO item_folders (item_id, folder_id, created_at) SELECT id, :f, now() - "
              "(substring(title from 7)::int * interval '1 minute') FROM user_items WHERE user_id = :u",
              f=folder, u=owner.id)
    url = ok(api(owner.token(write=True)).put(f"/api/v1/folders/{folder}/publication"))["feed_url"]
    parsed = feedparser.parse(httpx.get(url, timeout=60).content)
    assert len(parsed.entries) == 100
    assert [e.title for e in parsed.entries[:3]] == ["Entry 1", "Entry 2", "Entry 3"]


@pytest.fixture(scope="module")
def limited(data_dir: Path, admin: Admin) -> Iterator[LiveServer]:
    srv = LiveServer(data_dir, {"LEV_LIMIT_PUBLIC_PAGE": "3/hour", "LEV_RATE_LIMITS": "off",
                                "LEV_TRUSTED_PROXIES": '["127.0.0.1/32"]'}, log_name="public-limit").start()
    yield srv
    srv.stop()


def test_each_visitor_has_their_own_rate_limit_per_page(limited: LiveServer, admin: Admin) -> None:
    """Issue 47 item 6: the budget was the page's, shared by every visitor: one client's burst made it 429 for all."""
    owner = new_user(admin)
    urls = []
    for name in ("One", "Two"):
        folder = owner.folder(name)
        c = httpx.Client(base_url=limited.url, headers={"Authorization": f"Bearer {owner.token(write=True)}"})
        urls.append(ok(c.put(f"/api/v1/folders/{folder}/publication"))["url"])
    greedy = httpx.Client(timeout=60, headers={"X-Forwarded-For": "203.0.113.7"})  # named by the trusted proxy
    assert [greedy.get(u).status_code for u in (urls[0], urls[0] + "/feed.atom", urls[0])] == [200, 200, 200]
    refused = greedy.get(urls[0] + "/feed.atom")
    assert refused.status_code == 429 and refused.json()["error"] == "rate_limited"
    assert int(refused.headers["retry-after"]) > 0 and "noindex" in refused.headers["x-robots-tag"]
    assert greedy.get(urls[1]).status_code == 200  # another page's budget is its own
    other = httpx.Client(timeout=60, headers={"X-Forwarded-For": "203.0.113.8"})
    assert [other.get(u).status_code for u in (urls[0], urls[0] + "/feed.atom")] == [200, 200]  # theirs is theirs


def test_names_and_titles_with_control_characters_make_valid_xml() -> None:
    """Issue 47 item 5: a folder name or title holding \x01 or \x0b made the feed invalid XML for every reader."""
    import xml.etree.ElementTree as ET

    from lev.feeds import opml

    controls = "".join(chr(c) for c in range(32)) + "\ufffe\uffff"
    now = datetime(2026, 11, 1, tzinfo=UTC)
    entries = [public.Entry(str(uuid.uuid4()), f"Title{controls}end", "https://example.com/a", "text", now, now,
                            f"excerpt{controls}")]
    pub = public.Published("s" * 32, f"Folder{controls}name", "http://h/p/s", "http://h/p/s/feed.atom", entries)
    root = ET.fromstring(public.atom(pub, now))  # a strict XML parser
    atom = "{http://www.w3.org/2005/Atom}"
    assert root.find(f"{atom}title").text == "Folder\t\n\nname"  # type: ignore[union-attr]  # \r read as \n
    parsed = feedparser.parse(public.atom(pub, now))
    assert not parsed.bozo and parsed.entries[0].title.startswith("Title") and parsed.entries[0].title.endswith("end")
    doc = opml.render([{"title": f"Feed{controls}", "url": "https://example.com/feed", "folder_id": "f",
                        "site_url": "https://example.com/"}], {"f": f"Folder{controls}"})
    outlines = ET.fromstring(doc).findall(".//outline")
    assert [o.get("text") for o in outlines] == ["Folder\t\n\r", "Feed\t\n\r"]


def test_a_published_folder_named_with_control_characters_serves_a_valid_feed(api, admin: Admin, server) -> None:  # type: ignore[no-untyped-def]
    import xml.etree.ElementTree as ET

    owner = new_user(admin)
    folder = owner.folder("Odd\x01name\x0b")
    o = api(owner.token(write=True, kb_only=False))
    note(o, "A note in an oddly named folder.", "Title\x01with\x1fcontrols", folder)
    url = ok(o.put(f"/api/v1/folders/{folder}/publication"))["feed_url"]
    feed = httpx.get(url, timeout=60)
    assert feed.status_code == 200
    root = ET.fromstring(feed.content)
    atom = "{http://www.w3.org/2005/Atom}"
    assert root.find(f"{atom}title").text == "Oddname"  # type: ignore[union-attr]
    assert [e.find(f"{atom}title").text for e in root.findall(f"{atom}entry")] == ["Titlewithcontrols"]  # type: ignore[union-attr]
