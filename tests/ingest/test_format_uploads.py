"""Every document format through the live server: the upload handshake (signed URL, PUT, finalize-document), inline
text formats (POST /api/v1/ingest, MCP add_to_knowledge), search with a kind filter (REST and MCP) and the location
each passage carries (heading path, slide, sheet and rows); e-mail attachments as items of their own; hostile files
refused in words with nothing kept; a large document finished by the worker."""

from __future__ import annotations

import io
import os
import re
import time
import zipfile
from typing import Any

import httpx
import pytest

from tests import fixtures_documents as fd
from tests.highlights.test_reader_guides import session
from tests.ingest.test_uploads import put, sign, wait_item
from tests.mcp.test_mcp import call


def handshake(c: Any, name: str, mime: str, data: bytes, **extra: Any) -> httpx.Response:
    """Sign, PUT and finalize one file; the finalize response."""
    r = sign(c, mime, len(data), name)
    assert r.status_code == 200, r.text
    signed = r.json()
    assert signed["finalize_endpoint"] == "finalize-document"
    assert put(signed, data).status_code == 200
    return c.post("/api/v1/uploads/finalize-document", json={"path": signed["path"], "mime": mime,
                                                              "size": len(data), "filename": name, **extra})


def uploaded(c: Any, kind: str) -> dict[str, Any]:
    name, mime, data = fd.sample(kind)
    r = handshake(c, name, mime, data, auto_transform=False)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "ready", r.json()
    return dict(c.get(f"/api/v1/items/{r.json()['user_item_id']}").json())


def hits(c: Any, q: str, kind: str, mode: str = "keyword") -> list[dict[str, Any]]:
    r = c.get("/api/v1/search", params={"q": q, "mode": mode, "kind": kind, "limit": 10})
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


EXPECT = {  # sample -> (kind, title, words in its text, a query that finds it, its location's parts; a small
    # document is one passage: its heading is the first one's, deeper heading paths are tested on longer ones)
    "docx": ("document", "Q3 Plan", "Repaint the towers", "foghorns repaint towers", {"heading": "Goals"}),
    "odt": ("document", "Harbour rules", "east quay after dusk", "pilotage crowns", {"heading": "Harbour rules"}),
    "rtf": ("document", "Keeper's log", "horn sounded until dawn", "fog horn dawn", {"heading": None}),
    "pptx": ("presentation", "Roadmap", "budget freeze", "budget freeze questions",
             {"slide": 1, "heading": "Roadmap"}),
    "odp": ("presentation", "Tides", "Neap tides", "neap tides quarter moons", {"slide": 2, "heading": "Slide 2"}),
    "xlsx": ("spreadsheet", "budget", "Item: Rent for the boathouse; Q1: 1200", "boathouse rent",
             {"sheet": "Budget", "row_start": 2, "heading": "Budget"}),
    "ods": ("spreadsheet", "catch", "Fish: Herring; Kilos: 42", "herring", {"sheet": "Catch", "row_start": 2}),
    "csv": ("spreadsheet", "ships", "Ship: Gull; Tonnage: 120; Captain: Ada", "gull tonnage",
            {"sheet": "ships", "row_start": 2}),
    "epub": ("ebook", "The Lighthouse Keeper", "Old Ansel trimmed the lamp", "storm broke cape midnight",
             {"heading": "The Storm"}),  # each chapter a passage of its own
    "md": ("markdown", "Harbour notes", "Boats moor at the east quay", "pilotage seven crowns night",
           {"heading": "Moorings"}),
    "html": ("html", "Tide tables of the cape", "High water comes twice a day", "spring tides full moon",
             {"heading": "Tide tables"}),
    "eml": ("email", "Q3 plan for the lighthouses", "beacon repairs start", "beacon repairs june",
            {"heading": "Q3 plan for the lighthouses"}),
    "txt": ("text", "readme", "ferry timetable", "ferry timetable", {"heading": None}),
    "json": ("text", "config", "departs at noon", "ferry departs noon pier", {"heading": None}),
}


@pytest.mark.parametrize("sample", list(EXPECT))
def test_every_format_through_the_handshake(server, api, user, sample: str) -> None:
    c = api(user.token(write=True))
    kind, title, words, query, where = EXPECT[sample]
    item = uploaded(c, sample)
    assert (item["kind"], item["title"], item["status"]) == (kind, title, "ready")
    assert words in item["text"] and item["metadata"]["filename"] == fd.sample(sample)[0]
    found = [h for h in hits(c, query, kind) if h["item_id"] == item["id"]]
    assert found, f"{query!r} did not find the {sample}"
    hit = found[0]
    loc = hit["location"]
    assert item["text"][loc["char_start"]:loc["char_end"]] == hit["text"]  # the location slices back to it
    for key, value in where.items():
        assert loc[key] == value, (key, loc)
    assert ("slide" in loc) == (kind == "presentation") and ("sheet" in loc) == (kind == "spreadsheet")
    other = "spreadsheet" if kind != "spreadsheet" else "document"
    assert item["id"] not in [h["item_id"] for h in hits(c, query, other)]  # the kind filter holds


def test_mcp_searches_each_kind_and_reads_heading_slide_and_sheet(server, api, user) -> None:
    tok = user.token(write=True)
    c = api(tok)
    deck, sheet, book = (uploaded(c, s)["id"] for s in ("pptx", "xlsx", "epub"))

    def search(query: str, kinds: list[str]) -> list[dict[str, Any]]:
        body = call(server, tok, "search_knowledge_base", {"query": query, "kind": kinds, "mode": "hybrid"})
        return list(body["result"]["structuredContent"]["results"])

    slide = next(h for h in search("mooring fees quartermaster", ["presentation"]) if h["item_id"] == deck)
    assert slide["kind"] == "presentation" and slide["location"]["slide"] == 3
    assert slide["location"]["heading"] == "Slide 3"
    row = next(h for h in search("keeper of the north light", ["spreadsheet"]) if h["item_id"] == sheet)
    assert row["location"]["sheet"] == "People" and row["location"]["row_start"] == 2
    assert row["location"]["row_end"] == 3 and "Name: Bram; Role: Keeper of the north light" in row["text"]
    chapter = next(h for h in search("wreck of the Gull on the shingle", ["ebook"]) if h["item_id"] == book)
    assert chapter["location"]["heading"] == "Morning"
    assert all(h["kind"] == "ebook" for h in search("lamp", ["ebook"]))
    body = call(server, tok, "search_knowledge_base", {"query": "x", "kind": ["slides"]})
    assert body["error"]["code"] == -32602


def test_text_plain_with_a_markdown_name_and_windows_csv_are_read_as_their_format(server, api, user) -> None:
    c = api(user.token(write=True))
    r = handshake(c, "vault note.md", "text/plain", fd.MARKDOWN)
    assert r.status_code == 200, r.text
    item = c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()
    assert item["kind"] == "markdown" and item["title"] == "Harbour notes"
    assert item["metadata"]["tags"] == ["harbour", "tides", "projects/lighthouse"]
    assert item["metadata"]["links"] == ["East Quay", "Harbour Office"] and item["metadata"]["date"] == "2024-05-01"
    r = handshake(c, "ships.csv", "application/vnd.ms-excel", fd.CSV)
    assert r.status_code == 200, r.text
    assert c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()["kind"] == "spreadsheet"


def test_email_attachments_become_items_linked_both_ways(server, api, user) -> None:
    c = api(user.token(write=True))
    data = fd.eml([("beacons.docx", fd.DOCX, fd.docx("Beacon survey")),
                   ("notes.md", "text/markdown", b"# Copper\nThe beacon needs copper wire."),
                   ("virus.exe", "application/octet-stream", b"MZ\x90\x00"),
                   ("broken.xlsx", fd.XLSX, b"PK\x03\x04 truncated")])
    r = handshake(c, "plan.eml", "message/rfc822", data)
    assert r.status_code == 200, r.text
    message = c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()
    assert message["kind"] == "email" and message["title"] == "Q3 plan for the lighthouses"
    links = message["metadata"]["attachments"]
    assert [a["filename"] for a in links] == ["beacons.docx", "notes.md", "broken.xlsx"]
    assert links[2]["item_id"] is None and "corrupt or truncated" in links[2]["error"]
    assert message["metadata"]["attachments_skipped"] == 1  # the .exe
    docx_item = c.get(f"/api/v1/items/{links[0]['item_id']}").json()
    assert (docx_item["kind"], docx_item["title"]) == ("document", "Beacon survey")
    assert docx_item["metadata"]["attached_to"] == message["id"] and links[0]["kind"] == "document"
    note = c.get(f"/api/v1/items/{links[1]['item_id']}").json()
    assert note["kind"] == "markdown" and "copper wire" in note["text"]
    assert any(h["item_id"] == note["id"] for h in hits(c, "copper wire", "markdown"))


def test_inline_text_formats_through_ingest_and_mcp(server, api, user) -> None:
    tok = user.token(write=True)
    c = api(tok)
    r = c.post("/api/v1/ingest", json={"kind": "markdown", "text": fd.MARKDOWN.decode(), "auto_transform": False})
    assert r.status_code == 200 and r.json()["status"] == "ready", r.text
    item = c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()
    assert (item["kind"], item["title"]) == ("markdown", "Harbour notes")
    assert item["metadata"]["tags"] == ["harbour", "tides", "projects/lighthouse"]
    assert item["metadata"]["aliases"] == ["Port notes"] and "[[" not in item["text"]
    r = c.post("/api/v1/ingest", json={"kind": "spreadsheet", "text": fd.CSV.decode(), "title": "Fleet"})
    assert r.status_code == 200, r.text
    sheet = c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()
    assert sheet["title"] == "Fleet" and "Ship: Tern; Tonnage: 80; Captain: Bram" in sheet["text"]
    r = c.post("/api/v1/ingest", json={"kind": "html", "text": fd.HTML.decode()})
    assert r.status_code == 200 and c.get(f"/api/v1/items/{r.json()['user_item_id']}").json()["kind"] == "html"
    for body in ({"kind": "markdown", "text": "---\ntitle: only front matter\n---\n"},):
        r = c.post("/api/v1/ingest", json=body)
        assert r.status_code == 400 and r.json()["error"] == "ingest_failed", r.text
    r = c.post("/api/v1/ingest", json={"kind": "markdown", "url": "https://example.org/a.md"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_body"
    r = c.post("/api/v1/ingest", json={"kind": "docx", "text": "x"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_body"
    body = call(server, tok, "add_to_knowledge", {"text": fd.eml().decode(), "kind": "email"})
    made = body["result"]["structuredContent"]
    mail = c.get(f"/api/v1/items/{made['item_id']}").json()
    assert mail["kind"] == "email" and mail["title"] == "Q3 plan for the lighthouses"
    body = call(server, tok, "add_to_knowledge", {"url": "https://example.org/", "kind": "markdown"})
    assert body["error"]["code"] == -32602


HOSTILE = {  # name -> (file name, MIME type, bytes, status, code, words)
    "zip bomb": ("bomb.docx", fd.DOCX, fd.zip_bomb_docx, 422, "extraction_failed", "ZIP bomb"),
    "entities": ("laughs.docx", fd.DOCX, fd.entity_docx, 422, "extraction_failed", "entities"),
    "external entities": ("ext.docx", fd.DOCX, lambda: fd.entity_docx(True), 422, "extraction_failed", "entities"),
    "encrypted": ("locked.docx", fd.DOCX, lambda: fd.encrypted(fd.docx()), 422, "extraction_failed",
                  "password-protected"),
    "zip of something else": ("holiday.docx", fd.DOCX, fd.zip_of_something_else, 415, "unsupported_media_type",
                              "not what its type says"),
    "truncated": ("cut.pptx", fd.PPTX, lambda: fd.pptx()[:5000], 422, "extraction_failed", "corrupt or truncated"),
    "not a zip at all": ("fake.xlsx", fd.XLSX, lambda: b"Name,Role\nAda,keeper\n", 415, "unsupported_media_type",
                         "magic bytes"),
    "binary as text": ("fake.md", "text/markdown", lambda: b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64, 415,
                       "unsupported_media_type", "magic bytes"),
    "DRM e-book": ("drm.epub", fd.EPUB, lambda: fd.epub(drm=True), 422, "extraction_failed", "DRM"),
    "nested e-mail": ("deep.eml", "message/rfc822", lambda: nested_email(3000), 422, "extraction_failed",
                      "nested too deeply"),  # the parser's RecursionError was a 500 (issue 47, second look)
}


def nested_email(depth: int) -> bytes:
    """An e-mail of `depth` multipart/mixed parts, each inside the last."""
    head = "".join(f'Content-Type: multipart/mixed; boundary="b{i}"\r\n\r\n--b{i}\r\n' for i in range(depth))
    tail = "".join(f"\r\n--b{i}--\r\n" for i in reversed(range(depth)))
    return (f"From: a@example.com\r\nSubject: Deep\r\nMIME-Version: 1.0\r\n{head}"
            f"Content-Type: text/plain\r\n\r\nBottom.{tail}").encode()


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_uploads_are_refused_in_words_and_nothing_is_kept(server, api, user, data_dir, case: str) -> None:
    c = api(user.token(write=True))
    name, mime, make, status, code, words = HOSTILE[case]
    data = make()
    before = c.get("/api/v1/items").json()["total"]
    r = sign(c, mime, len(data), name)
    signed = r.json()
    assert put(signed, data).status_code == 200
    r = c.post("/api/v1/uploads/finalize-document", json={"path": signed["path"], "mime": mime, "size": len(data),
                                                           "filename": name})
    assert r.status_code == status and r.json()["error"] == code and words in r.json()["message"], r.text
    deadline = time.monotonic() + 60
    while (data_dir / "objects" / signed["path"]).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (data_dir / "objects" / signed["path"]).exists()  # the upload was discarded
    assert c.get("/api/v1/items").json()["total"] == before  # and no item made


def test_a_deeply_nested_email_sent_as_text_is_refused_in_words(server, api, user) -> None:
    c = api(user.token(write=True))
    r = c.post("/api/v1/ingest", json={"kind": "email", "text": nested_email(3000).decode()})
    assert r.status_code == 400 and r.json()["error"] == "ingest_failed", r.text  # the 400 /ingest documents
    assert "nested too deeply" in r.json()["message"]


def test_the_415_names_what_is_accepted(server, api, user) -> None:
    r = sign(api(user.token(write=True)), "application/x-7z-compressed", 100, "a.7z")
    assert r.status_code == 415 and r.json()["error"] == "unsupported_media_type"
    for accepted in (".docx", ".pptx", ".xlsx", ".csv", ".epub", ".md", ".html", ".eml", ".txt", "PDF"):
        assert accepted in r.json()["message"]


def test_a_document_past_four_mib_is_read_by_the_worker_and_titled_from_itself(server, api, user) -> None:
    c = api(user.token(write=True))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:  # a report with a large picture in it
        src = zipfile.ZipFile(io.BytesIO(fd.long_docx(pages=40)))
        for info in src.infolist():
            z.writestr(info, src.read(info), zipfile.ZIP_DEFLATED)
        z.writestr("word/media/photo.bin", os.urandom(5 * 1024 * 1024), zipfile.ZIP_STORED)
    data = out.getvalue()
    r = handshake(c, "report.docx", fd.DOCX, data, auto_transform=False)
    assert r.status_code == 200 and r.json()["status"] == "processing", r.text
    item = wait_item(c, r.json()["user_item_id"], lambda i: i["status"] != "processing", timeout=600)
    assert item["status"] == "ready", item
    assert item["title"] == "A long report" and "title_from_file" not in item["metadata"]
    assert "Page 40, paragraph 4" in item["text"]
    found = [h for h in hits(c, "Page 37 paragraph 2", "document") if h["item_id"] == item["id"]]
    assert found and re.match(r"Chapter 31 > Chapter 3[67]$", found[0]["location"]["heading"])  # its path


def test_the_reader_view_shows_slides_and_headings(server, admin) -> None:
    c = session(server, admin)
    name, mime, data = fd.sample("pptx")
    r = handshake(c, name, mime, data, auto_transform=False)
    assert r.status_code == 200, r.text
    html = c.get(f"/items/{r.json()['user_item_id']}").text
    assert re.findall(r'<h3 class="page-mark">Slide (\d+)</h3>', html) == ["1", "2", "3"]
    # the deck's title ("Roadmap", its first slide's heading) is the page's heading, not repeated in the reader
    assert re.findall(r'<h1>([^<]+)</h1>', html) == ["Roadmap"]
    assert re.findall(r'class="reader-heading"><span data-at="\d+">([^<]+)</span>', html) == ["Costs"]
    name, mime, data = fd.sample("docx")
    r = handshake(c, name, mime, data, auto_transform=False)
    html = c.get(f"/items/{r.json()['user_item_id']}").text
    assert re.findall(r'class="reader-heading"><span data-at="\d+">([^<]+)</span>', html) == [
        "Goals", "Budget", "Risks"]
    assert "page-mark" not in html


def test_a_stored_html_file_comes_back_as_a_sandboxed_download(server, api, user) -> None:
    """A saved .html page is read for its text; the file itself, fetched back, must not run as a page of Lev's
    origin (its script would act with the session of whoever opens it): a download, sandboxed, never inline."""
    c = api(user.token(write=True))
    data = b"<html><head><title>Trap</title></head><body><p>Gulls nest on the cliffs in May.</p>" \
           b"<script>fetch('/api/v1/tokens')</script></body></html>"
    r = handshake(c, "trap.html", "text/html", data, auto_transform=False)
    assert r.status_code == 200, r.text
    got = c.get(f"/api/v1/items/{r.json()['user_item_id']}/media")
    assert got.status_code == 200 and got.content == data
    assert got.headers["content-disposition"].startswith("attachment"), got.headers
    assert got.headers["content-security-policy"].startswith("sandbox"), got.headers
    assert got.headers["x-content-type-options"] == "nosniff"
    xhtml = b'<html xmlns="http://www.w3.org/1999/xhtml"><body><p>Terns dive for sand eels.</p>' \
            b"<script>fetch('/api/account')</script></body></html>"  # the attacker's: no page policy was added
    r = handshake(c, "notes.xhtml", "application/xhtml+xml", xhtml, auto_transform=False)
    assert r.status_code == 200, r.text
    got = c.get(f"/api/v1/items/{r.json()['user_item_id']}/media")
    assert got.status_code == 200 and got.content == xhtml
    assert got.headers["content-disposition"].startswith("attachment"), got.headers
    assert got.headers["content-security-policy"].startswith("sandbox"), got.headers
