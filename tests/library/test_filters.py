"""Search filters (issue 39): kind, site, after/before, item_id and folder_id on REST and MCP, inside the SQL of
every mode, within the token's scope; bad filters are 400 invalid_body naming the parameter (MCP -32602)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from lev.core.errors import ApiError
from tests.fixtures_answers import PDF_PAGES, Library, build_library
from tests.mcp.test_mcp import rpc
from tests.stack import Api, User, new_user

MODES = ("hybrid", "semantic", "keyword")


@pytest.fixture(scope="module")
def lib(server, admin, tmp_path_factory: pytest.TempPathFactory) -> tuple[User, Api, Library]:  # type: ignore[no-untyped-def]
    user = new_user(admin)
    c = Api(server.url, user.token(write=True, kb_only=False))
    return user, c, build_library(c, admin, Path(tmp_path_factory.mktemp("answers")))


def hits(c: Api, q: str = "lighthouse", **params: Any) -> list[dict[str, Any]]:
    r = c.get("/api/v1/search", params={"q": q, **params})
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


def items(results: list[dict[str, Any]]) -> set[str]:
    return {h["item_id"] for h in results}


def test_kind_filters_every_mode_inside_the_sql(lib, admin) -> None:  # type: ignore[no-untyped-def]
    _user, c, library = lib
    pdf_chunks = int(admin.sql("SELECT count(*) FROM chunks c JOIN user_items u ON u.content_id = c.content_id "
                               "WHERE u.id = :i", i=library.pdf)[0][0])
    assert pdf_chunks >= 3
    for mode in MODES:
        # The long note's hundreds of chunks say "lighthouse lamp" more often than the PDF: a filter applied after
        # ranking would find no PDF among the first candidates. Inside the SQL, every PDF chunk comes back.
        found = hits(c, "lighthouse lamp keeper", kind="pdf", mode=mode, limit=50)
        assert items(found) == {library.pdf}, mode
        assert len(found) == pdf_chunks if mode != "keyword" else 0 < len(found) <= pdf_chunks
        assert all(h["kind"] == "pdf" for h in found)
        inside = hits(c, "lighthouse lamp", item_id=library.long, mode=mode, limit=10)
        assert items(inside) == {library.long} and len(inside) == 10, mode
    pages, notes = set(library.pages.values()), set(library.notes.values())
    assert items(hits(c, kind="page", limit=50)) == pages
    assert items(hits(c, kind="url", limit=50)) == pages  # captured pages are web pages too
    assert items(hits(c, kind="text", before="2026-04-01", limit=50)) == notes
    assert items(hits(c, "logbook watch keeper", kind="text")) == {library.long}
    both = c.get("/api/v1/search", params=[("q", "lighthouse"), ("kind", "pdf"), ("kind", "page"), ("limit", 50)])
    assert items(both.json()["results"]) == pages | {library.pdf}
    assert items(hits(c, kind="audio")) == set()


def test_site_matches_the_host_and_its_subdomains(lib) -> None:  # type: ignore[no-untyped-def]
    _user, c, library = lib
    guide, news = library.pages["https://example.org/guide"], library.pages["https://news.example.org/story"]
    for mode in MODES:
        assert items(hits(c, site="example.org", mode=mode, limit=50)) == {guide, news}, mode
    assert items(hits(c, site="news.example.org", limit=50)) == {news}
    assert items(hits(c, site="EXAMPLE.org.", limit=50)) == {guide, news}  # case and a trailing dot
    r = c.get("/api/v1/search", params={"q": "lighthouse", "site": "https://example.org/anything"})
    assert r.status_code == 400 and "site" in r.json()["message"]  # a host name, not a URL
    assert items(hits(c, site="badexample.org", limit=50)) == {library.pages["https://badexample.org/fake"]}
    assert items(hits(c, site="ample.org", limit=50)) == set()


def test_after_and_before_bound_the_saved_date(lib) -> None:  # type: ignore[no-untyped-def]
    _user, c, library = lib
    jan, feb, mar = (library.notes[t] for t in ("January note", "February note", "March note"))
    assert items(hits(c, kind="text", after="2026-02-01", before="2026-03-01", limit=50)) == {feb}
    assert items(hits(c, kind="text", before="2026-02-15", limit=50)) == {jan, feb}  # the day counts
    assert items(hits(c, kind="text", before="2026-02-15T12:00:00Z", limit=50)) == {jan}  # before is exclusive
    assert items(hits(c, kind="text", after="2026-02-15T12:00:00Z", before="2026-04-01", limit=50)) == {feb, mar}
    assert items(hits(c, kind="text", after="2026-02-15T13:00:01+01:00", before="2026-04-01")) == {mar}
    for mode in MODES:
        assert items(hits(c, kind="text", after="2026-01-01", before="2026-01-31", mode=mode)) == {jan}, mode
    for r in hits(c, kind="text", before="2026-04-01", limit=50):
        assert r["saved_at"].startswith("2026-0")


def test_folder_and_item_filters_keep_the_scope(lib, server, admin) -> None:  # type: ignore[no-untyped-def]
    user, c, library = lib
    reports = user.folder(f"Reports {uuid.uuid4().hex[:6]}")
    assert c.post(f"/api/v1/items/{library.pdf}/folders", json={"folder_ids": [reports]}).status_code == 200
    assert items(hits(c, folder_id=reports, limit=50)) == {library.pdf}
    scoped = Api(server.url, user.token(folders=[reports], kb_only=False))
    assert items(hits(scoped, limit=50)) == {library.pdf}
    assert items(hits(scoped, item_id=library.pdf, limit=50)) == {library.pdf}
    other = user.folder(f"Other {uuid.uuid4().hex[:6]}")
    stranger = Api(server.url, new_user(admin).token())
    for client, params in ((scoped, {"item_id": library.long}), (scoped, {"folder_id": other}),
                           (stranger, {"item_id": library.pdf}), (c, {"item_id": str(uuid.uuid4())}),
                           (c, {"folder_id": str(uuid.uuid4())})):
        r = client.get("/api/v1/search", params={"q": "lighthouse", **params})
        assert r.status_code == 404 and r.json()["error"] == "not_found", (params, r.text)


def test_a_content_twice_in_a_folder_counts_once(lib, admin) -> None:  # type: ignore[no-untyped-def]
    """A folder holding two items of one content (a second save of one URL): the scope's contents are read with
    their repeats, and no chunk's keyword score counts them twice."""
    user, c, library = lib
    once, twice = (user.folder(f"{n} {uuid.uuid4().hex[:6]}") for n in ("Once", "Twice"))
    for folder in (once, twice):
        assert c.post(f"/api/v1/items/{library.pdf}/folders", json={"folder_ids": [folder]}).status_code == 200
    copy = str(uuid.uuid4())
    admin.sql("INSERT INTO user_items (id, user_id, content_id, kind, title, in_kb, archived, status, created_at) "
              "SELECT :id, user_id, content_id, kind, 'PDF again', true, false, 'ready', now() FROM user_items "
              "WHERE id = :src", id=copy, src=library.pdf)
    admin.sql("INSERT INTO item_folders (item_id, folder_id) VALUES (:i, :f)", i=copy, f=twice)
    try:
        # a rare term (its postings joined with the scope's contents) and common ones (read content by content)
        for mode, q in (("keyword", "Fresnel"), ("keyword", "lighthouse station"), ("hybrid", "Fresnel lighthouse")):
            a = {h["chunk_id"]: h for h in hits(c, q, folder_id=once, mode=mode, limit=50)}
            b = {h["chunk_id"]: h for h in hits(c, q, folder_id=twice, mode=mode, limit=50)}
            assert a and set(a) == set(b), mode
            assert {h["item_id"] for h in b.values()} == {copy}  # the newest item of the content
            for chunk, hit in a.items():
                assert b[chunk]["keyword_rank"] == pytest.approx(hit["keyword_rank"]), (mode, chunk)
                assert b[chunk]["score"] == pytest.approx(hit["score"]), (mode, chunk)
    finally:  # the module's library as it was: the copy would be the newest item of the PDF's hits
        admin.sql("DELETE FROM item_folders WHERE item_id = :i", i=copy)
        admin.sql("DELETE FROM user_items WHERE id = :i", i=copy)


@pytest.mark.parametrize(("params", "name"), [
    ({"kind": "worksheet"}, "kind"), ({"kind": "PDF,nope"}, "kind"), ({"after": "yesterday"}, "after"),
    ({"before": "2026-02-30"}, "before"), ({"after": "2026-03-01", "before": "2026-02-01"}, "after"),
    ({"item_id": "not-a-uuid"}, "item_id"), ({"folder_id": "123"}, "folder_id"), ({"site": "bad host!"}, "site"),
    ({"site": "-x.org"}, "site"), ({"after": "2026-13-01T00:00:00Z"}, "after"),
])
def test_bad_filters_are_400_naming_the_parameter(lib, params: dict[str, str], name: str) -> None:  # type: ignore[no-untyped-def]
    _user, c, _library = lib
    r = c.get("/api/v1/search", params={"q": "lighthouse", **params})
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["error"] == "invalid_body" and name in body["message"], body
    if name == "kind":
        assert "url" in body["message"] and "youtube" in body["message"] and "pdf" in body["message"]
    if name in ("after", "before") and "later" not in body["message"]:  # the form asked for, not a regular expression
        assert "RFC 3339 date (2026-03-01) or date-time" in body["message"] and "[0-9]" not in body["message"], body
    if name == "site":
        assert "is not a host name (example.org" in body["message"] and "[A-Z" not in body["message"], body


def mcp_search(server, token: str, **args: Any) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return dict(rpc(server, token, "tools/call", {"name": "search_knowledge_base",
                                                  "arguments": {"query": "lighthouse", **args}}).json())


def test_mcp_search_takes_the_same_filters(lib, server) -> None:  # type: ignore[no-untyped-def]
    user, _c, library = lib
    tok = user.token(kb_only=False)
    guide, news = library.pages["https://example.org/guide"], library.pages["https://news.example.org/story"]

    def found(**args: Any) -> set[str]:
        body = mcp_search(server, tok, limit=50, **args)
        assert body["result"]["isError"] is False, body
        return {h["item_id"] for h in body["result"]["structuredContent"]["results"]}

    assert found(kind=["pdf"]) == {library.pdf}
    assert found(kind=["pdf", "page"]) == set(library.pages.values()) | {library.pdf}
    assert found(site="example.org") == {guide, news}
    assert found(kind=["text"], after="2026-02-01", before="2026-02-28") == {library.notes["February note"]}
    assert found(item_id=library.long) == {library.long}
    for args in ({"kind": ["worksheet"]}, {"kind": "pdf"}, {"after": "soon"}, {"item_id": "nope"},
                 {"after": "2026-03-01", "before": "2026-01-01"}, {"site": "no spaces.org"}):
        body = mcp_search(server, tok, **args)
        assert body["error"]["code"] == -32602, (args, body)
        assert body["error"]["data"]["error"] == "invalid_body"
        assert "[0-9]" not in body["error"]["message"] and "[A-Z" not in body["error"]["message"], body
    out = mcp_search(server, user.token(folders=[user.folder(f"Empty {uuid.uuid4().hex[:6]}")]),
                     item_id=library.pdf)
    assert out["result"]["isError"] is True and "not_found" in out["result"]["content"][0]["text"]


def test_pdf_page_counts_match_the_fixture() -> None:
    assert len(PDF_PAGES) == 5


def test_filters_narrow_a_shared_folder_too(server, admin) -> None:  # type: ignore[no-untyped-def]
    owner, member = new_user(admin), new_user(admin)
    o = Api(server.url, owner.token(write=True))
    m = Api(server.url, member.token(write=True))
    folder = owner.folder("Shared harbour")
    inv = o.post(f"/api/v1/folders/{folder}/invitations", json={"email": member.email, "role": "viewer"})
    assert inv.status_code == 201, inv.text
    assert m.post(f"/api/v1/invitations/{inv.json()['id']}/accept").status_code == 200
    shared = {}
    for url, title in (("https://port.example.net/a", "Harbour lights"), ("https://other.org/b", "Harbour log")):
        r = o.post("/api/v1/ingest", json={"kind": "page", "url": url, "auto_transform": False,
                                            "html": f"<html><body><article><h1>{title}</h1><p>The harbour lighthouse "
                                                    f"guides ships past the breakwater at night, {title}.</p>"
                                                    "</article></body></html>"})
        assert r.status_code == 200, r.text
        shared[url] = r.json()["user_item_id"]
        assert o.post(f"/api/v1/items/{shared[url]}/folders", json={"folder_ids": [folder]}).status_code == 200
    own = m.post("/api/v1/ingest", json={"kind": "text", "text": "My own harbour lighthouse note.",
                                         "auto_transform": False}).json()["user_item_id"]
    assert items(hits(m, "harbour lighthouse", limit=50)) == {*shared.values(), own}
    for mode in MODES:
        assert items(hits(m, "harbour lighthouse", site="example.net", mode=mode)) == \
            {shared["https://port.example.net/a"]}, mode
    assert items(hits(m, "harbour lighthouse", kind="text")) == {own}
    assert items(hits(m, "harbour lighthouse", item_id=shared["https://other.org/b"])) == {shared["https://other.org/b"]}
    assert items(hits(m, "harbour lighthouse", folder_id=folder, kind="url")) == set(shared.values())
    assert items(hits(m, "harbour lighthouse", folder_id=folder, after="2999-01-01")) == set()


def test_the_contract_states_exactly_what_the_filters_accept() -> None:
    """The patterns in openapi.yaml and mcp_tools.json are lev.library.filters' own: what matches them is accepted,
    so generated clients and fuzzers never meet a valid value refused."""
    import yaml

    from lev.core.contract import mcp_tools
    from lev.library.filters import SITE_PATTERN, WHEN_PATTERN, parse_site, parse_when
    from tests.stack import ROOT

    rest = {p["name"]: p["schema"] for p in yaml.safe_load((ROOT / "openapi.yaml").read_text())["paths"][
        "/api/v1/search"]["get"]["parameters"]}
    mcp = next(t for t in mcp_tools()["tools"] if t["name"] == "search_knowledge_base")["inputSchema"]["properties"]
    for schemas in (rest, mcp):
        assert schemas["site"]["pattern"] == SITE_PATTERN
        assert schemas["after"]["pattern"] == schemas["before"]["pattern"] == WHEN_PATTERN
    for value in ("2024-02-29", "2000-02-29T23:59:59.123456789-23:59", "0001-01-01", "9999-12-31 00:00",
                  "2026-03-01\n", "2026-03-01t09:30z"):
        assert parse_when(value, "after") is not None and parse_when(value, "before") is not None
    for value in ("2026-02-29", "1900-02-29", "0000-01-01", "2026-03-01T24:00", " 2026-03-01"):
        with pytest.raises(ApiError):
            parse_when(value, "after")
    assert parse_site("News.Example.ORG.") == "news.example.org" and parse_site("0") == "0"
    for value in ("-x.org", "a b", "https://example.org", "x" * 64 + ".org", "a..b"):
        with pytest.raises(ApiError):
            parse_site(value)
