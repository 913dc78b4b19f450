"""The authorization server, hardened (issue 32 item 3), over HTTP against the live server: an authorization request
redirects to the client only once it is valid and the user is signed in (every error before that is Lev's own page),
and client registrations and client metadata documents are bounded."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import httpx

from tests.cimd_site import ClientSite
from tests.oauth.test_oauth import CALLBACK, Person, _pkce, site  # noqa: F401 (the metadata site fixture)
from tests.stack import Admin, LiveServer

EVIL = "http://127.0.0.1:9/attacker"  # an attacker's client may register any redirect URI it likes


def _authorize(base: str, cid: str, redirect_uri: str, **over: str) -> str:
    q = {"response_type": "code", "client_id": cid, "redirect_uri": redirect_uri, "state": "s1",
         "code_challenge": _pkce()[1], "code_challenge_method": "S256", "scope": "lev:read",
         "resource": f"{base}/api/mcp", **over}
    return f"{base}/oauth/authorize?{urlencode({k: v for k, v in q.items() if v is not None})}"


def test_an_invalid_request_is_shown_on_lev_s_page_never_sent_to_the_redirect_uri(server: LiveServer,
                                                                                  admin: Admin) -> None:
    base = server.url
    cid = httpx.post(f"{base}/oauth/register", json={"redirect_uris": [EVIL], "client_name": "Attacker",
                                                     "token_endpoint_auth_method": "none"}).json()["client_id"]
    person = Person(base, admin)
    stranger = httpx.Client(base_url=base, timeout=60)  # not signed in
    bad: list[tuple[dict[str, Any], str]] = [
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"response_type": None}, "unsupported_response_type"),
        ({"code_challenge_method": "plain"}, "invalid_request"), ({"code_challenge": "short"}, "invalid_request"),
        ({"resource": ""}, "invalid_request"), ({"resource": "https://elsewhere.example/api/mcp"}, "invalid_target"),
        ({"state": "s" * 2001}, "invalid_request")]
    for browser in (stranger, person.web):
        for over, code in bad:
            r = browser.get(_authorize(base, cid, EVIL, **over))
            assert r.status_code == 400 and "location" not in r.headers, (over, r.status_code, r.headers)
            assert code in r.text and r.headers["content-type"].startswith("text/html")
            assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    # a valid request of a stranger goes to Lev's sign-in page, not to the client
    r = stranger.get(_authorize(base, cid, EVIL))
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next=%2Foauth%2Fauthorize")
    # valid and signed in: only now does an answer go back to the client (a code, or access_denied)
    denied = person.consent(_authorize(base, cid, EVIL), decision="deny")
    assert denied.status_code == 302 and denied.headers["location"].startswith(EVIL + "?error=access_denied")
    assert person.approve(_authorize(base, cid, EVIL))["code"]


def _register(base: str, body: Any) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{base}/oauth/register", content=raw, headers={"Content-Type": "application/json"})


def test_client_registration_is_bounded(server: LiveServer, admin: Admin) -> None:
    base = server.url
    uris = [f"http://127.0.0.1:9/cb{n}" for n in range(11)]
    long_uri = "https://app.example/" + "p" * 1990
    cases: list[tuple[Any, str, str]] = [
        ({"client_name": "N" * 201, "redirect_uris": [CALLBACK]}, "invalid_client_metadata", "client_name"),
        ({"client_name": "bounded-uris", "redirect_uris": uris}, "invalid_redirect_uri", "more than 10"),
        ({"client_name": "bounded-uri", "redirect_uris": [long_uri]}, "invalid_redirect_uri", "2000"),
        ({"client_name": "bounded-client-uri", "redirect_uris": [CALLBACK], "client_uri": long_uri},
         "invalid_client_metadata", "client_uri"),
        ({"client_name": "bounded-contacts", "redirect_uris": [CALLBACK],
          "contacts": [f"c{n}@example.com" for n in range(11)]}, "invalid_client_metadata", "contacts"),
        ({"client_name": "bounded-extra", "redirect_uris": [CALLBACK], "software_statement": "x" * 5000},
         "invalid_client_metadata", "software_statement"),
        ({"client_name": "bounded-size", "redirect_uris": [CALLBACK],
          **{f"x_{n}": "y" * 1000 for n in range(17)}}, "invalid_client_metadata", "16384 bytes"),
    ]
    for body, code, says in cases:
        r = _register(base, body)
        assert r.status_code == 400 and r.json()["error"] == code, (body.get("client_name"), r.text)
        assert says in r.json()["error_description"], r.json()
    names = ["N" * 201] + [b["client_name"] for b, _, _ in cases[1:]]
    assert admin.sql("SELECT count(*) FROM oauth_clients WHERE client_name = ANY(:n)", n=names)[0][0] == 0
    at_bounds = _register(base, {"client_name": "B" * 200, "redirect_uris": uris[:10], "token_endpoint_auth_method":
                                 "none", "contacts": ["a@example.com"] * 10})
    assert at_bounds.status_code == 201, at_bounds.text
    # a browser extension's redirect URI (https on <id>.chromiumapp.org) is an https URI like any other
    ext = _register(base, {"client_name": "Extension", "redirect_uris": ["https://abcdefghijklmnopabcdefghijklmnop"
                                                                         ".chromiumapp.org/"],
                           "token_endpoint_auth_method": "none"})
    assert ext.status_code == 201, ext.text


def test_client_metadata_documents_are_bounded(server: LiveServer, admin: Admin,
                                               site: ClientSite) -> None:  # noqa: F811
    base, person = server.url, Person(server.url, admin)
    site.docs["/c/many-uris.json"] = {"client_id": site.url + "/c/many-uris.json", "client_name": "Many",
                                      "redirect_uris": [CALLBACK] + [f"http://127.0.0.1:9/cb{n}" for n in range(10)]}
    site.docs["/c/long-name.json"] = {"client_id": site.url + "/c/long-name.json", "client_name": "L" * 201,
                                      "redirect_uris": [CALLBACK]}
    for path, says in (("/c/many-uris.json", "more than 10"), ("/c/long-name.json", "client_name is longer")):
        r = person.web.get(_authorize(base, site.url + path, CALLBACK))
        assert r.status_code == 400 and "location" not in r.headers and says in r.text, (path, r.text[-500:])
    good = site.document("/c/bounded-ok.json", [CALLBACK], name="B" * 200)
    assert "B" * 200 in person.web.get(_authorize(base, good, CALLBACK)).text
