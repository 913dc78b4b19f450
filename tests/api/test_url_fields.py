"""Issue 38 item 5: every URL field (ingest, capture, a selection's source, feeds, webhooks, OAuth client metadata)
is parsed by `lev.core.weburl`, and no string reaches a 500: an unclosed IPv6 bracket, a port that is no number, a
scheme without a host are 400 in words. The HTTP cases only send strings whose host (when the parser accepts them)
is a loopback address, so every fetch they cause stays on this machine."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lev.core import weburl
from lev.ingest.urls import canonical_url, classify_media_url
from lev.oauth.clients import is_metadata_url, redirect_uri_allowed
from tests.stack import User

SCHEMES = ["http://", "https://", "HTTPS://", "http:", "http:/", "http:///", "", "ftp://", "javascript:", "//"]
HOSTS = ["[::1", "[::1]", "[::1]:8", "[", "]", "[]", "[x]", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999",
         "127.0.0.1:abc", "127.0.0.1:-1", "user@127.0.0.1", "%zz", "127.0.0.1\x00", " 127.0.0.1", "", ".", "..",
         "[::ffff:127.0.0.1]", "127.0.0.1:8\t"]
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
MALFORMED = ["https://[::1/x", "http://", "https://", "http:///x", "http://[::1/", "http://127.0.0.1:abc/",
             "http://127.0.0.1:99999/", "http://[x]/", "http:// /", "http://%zz/", "http://a\x00b/",
             "http://xn--zz/"]  # an A-label that is no punycode: httpx parses it and fails reading its host (a 500)


def urls() -> st.SearchStrategy[str]:
    tail = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(["/x", "/[", "?a=[", "#f", ":80"])
    return st.one_of(st.builds(lambda s, h, t: s + h + t, st.sampled_from(SCHEMES), st.sampled_from(HOSTS), tail),
                     st.text(max_size=30), st.sampled_from(MALFORMED))


def _safe(url: str) -> bool:
    """Whether sending `url` can only reach this machine (refused by the parser, or a loopback host)."""
    try:
        parts = weburl.parse(url)
    except weburl.BadUrl:
        return True
    return (parts.hostname or "") in LOOPBACK


@given(st.text(max_size=60) | urls())
@settings(max_examples=2000, deadline=None)
def test_the_parser_accepts_or_refuses_every_string_and_what_it_accepts_every_step_can_use(text: str) -> None:
    try:
        parts = weburl.parse(text)
    except weburl.BadUrl as exc:
        assert str(exc)
        return
    assert parts.scheme.lower() in ("http", "https") and parts.hostname
    canonical_url(text)
    classify_media_url(text)
    assert httpx.URL(text.strip()).host  # the fetch reads it: an IDNA label must decode
    redirect_uri_allowed(text)
    is_metadata_url(text)


@pytest.mark.parametrize("bad", MALFORMED)
def test_malformed_urls_are_refused_in_words(bad: str) -> None:
    with pytest.raises(weburl.BadUrl):
        weburl.parse(bad)


def test_malformed_urls_are_400_in_every_field(server, user: User) -> None:
    c = httpx.Client(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {user.token(write=True)}"})
    html = "<html><body><p>Hello there, a page.</p></body></html>"
    for bad in MALFORMED:
        for path, body in (("/api/v1/ingest", {"kind": "url", "url": bad}),
                           ("/api/v1/ingest", {"kind": "page", "url": bad, "html": html}),
                           ("/api/v1/ingest", {"kind": "text", "text": "a note", "source_url": bad}),
                           ("/api/v1/feeds", {"url": bad}),
                           ("/api/v1/webhooks", {"url": bad, "events": ["item.ready"]})):
            r = c.post(path, json=body)
            assert r.status_code == 400 and r.json()["error"] == "invalid_body" and r.json()["message"], \
                (path, body, r.text)
        r = httpx.post(f"{server.url}/oauth/register", json={"redirect_uris": [bad], "client_name": "x"}, timeout=60)
        assert r.status_code == 400, (bad, r.text)
    r = c.post("/api/v1/ingest", json={"kind": "url", "url": "https://[::1/x"})
    assert "cannot be parsed" in r.json()["message"], r.text  # the fuzzer's 500 (issue 38 item 6)
    r = c.post("/api/v1/ingest", json={"kind": "page", "url": "http:///x", "html": html})
    assert r.json()["message"] == "url has no host.", r.text  # a capture URL needs a host


@given(urls())
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_string_in_a_url_field_reaches_a_500(server, user: User, text: str) -> None:
    assume(_safe(text))
    c = httpx.Client(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {user.token(write=True)}"})
    html = "<html><body><p>Hello there, a page.</p></body></html>"
    for path, body in (("/api/v1/ingest", {"kind": "url", "url": text}),
                       ("/api/v1/ingest", {"kind": "page", "url": text, "html": html}),
                       ("/api/v1/ingest", {"kind": "text", "text": "a note", "source_url": text}),
                       ("/api/v1/feeds", {"url": text}),
                       ("/api/v1/webhooks", {"url": text, "events": ["item.ready"]})):
        r = c.post(path, json=body)
        assert r.status_code < 500, (path, body, r.text)
        if path == "/api/v1/webhooks" and r.status_code == 201:
            assert c.delete(f"/api/v1/webhooks/{r.json()['id']}").status_code == 200
    r = httpx.post(f"{server.url}/oauth/register", json={"redirect_uris": [text], "client_name": "x"}, timeout=60)
    assert r.status_code < 500, (text, r.text)
    r = httpx.get(f"{server.url}/oauth/authorize", params={"client_id": text, "response_type": "code"},
                  follow_redirects=False, timeout=60)
    assert r.status_code < 500, (text, r.text)
