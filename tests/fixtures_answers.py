"""A library to ask narrowed questions of (issue 39): pages captured from several sites, notes saved at different
moments, a multi-page PDF and a long note with headings. Every item mentions lighthouses, so one query reaches
them all and only the filters tell them apart."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests import fixtures_media as fm

PAGES = {  # url -> (title, headings and paragraphs)
    "https://example.org/guide": ("Lighthouse guide", [
        ("h2", "Visiting hours"),
        *[("p", f"Visit {k}: the lighthouse opens its gallery to visitors on summer weekends; the keeper's cottage "
                f"is a museum of lamps and foghorns, and guide number {k} tells its history.") for k in range(6)],
        ("h2", "The lens"),
        *[("p", f"Prism {k}: a first-order Fresnel lens of brass and glass prisms turns the lighthouse lamp into a "
                f"beam seen twenty nautical miles out at sea, ring {k} bending the light.") for k in range(6)],
        ("p", "The lens room smells of brass polish and paraffin, and its clockwork still turns every night.")]),
    "https://news.example.org/story": ("Lighthouse restored", [
        ("p", "Volunteers restored the old lighthouse on the northern cape, repainting the tower and mending the "
              "lantern room after a winter of storms battered the coast.")]),
    "https://badexample.org/fake": ("Fake lighthouse", [
        ("p", "This page pretends to be about a lighthouse but is on another site entirely, a look-alike host "
              "that only ends with the same letters as the real one.")]),
    "https://other.net/keepers": ("Keepers", [
        ("p", "Lighthouse keepers trimmed wicks, wound clockwork and logged the weather every four hours, "
              "alone on rocks far from shore.")]),
}

NOTES = {  # title -> (saved at, text)
    "January note": ("2026-01-10T12:00:00+00:00", "A January note: the lighthouse was dark during the storm of "
                                                   "the tenth, and the relief boat could not land."),
    "February note": ("2026-02-15T12:00:00+00:00", "A February note: we repainted the lighthouse gallery railing "
                                                    "red and white before the inspection."),
    "March note": ("2026-03-20T12:00:00+00:00", "A March note: the lighthouse lamp was converted to a solar "
                                                 "powered LED that needs no keeper."),
}

PDF_TOPICS = ["the stations of the eastern coast", "staffing and the rota of watches", "optics and the Fresnel lens",
              "budgets and fuel oil", "storms and repairs"]
FRESNEL = "The Fresnel lens at Cape Bleak was cracked by frost and replaced with a second-order lens."


def pdf_page(n: int) -> str:
    """Page n (1-based) of the lighthouse board's report: a dozen lines about its topic; page 3 tells of the
    cracked Fresnel lens."""
    topic = PDF_TOPICS[(n - 1) % len(PDF_TOPICS)]
    lines = [f"Report page {n}: {topic}."]
    for k in range(12):
        lines.append(f"Line {k} of page {n}: every lighthouse station reported on {topic} this year, {k * 7 + n}.")
    if n == 3:
        lines.insert(6, FRESNEL)
    return "\n".join(lines)


PDF_PAGES = [pdf_page(n) for n in range(1, 6)]

NEEDLE = "The quartermaster counted exactly seventeen albatross feathers in the brass chest."
NEEDLE_CHAPTER = 27


def long_note(chapters: int = 40) -> str:
    """A long markdown note (about 60,000 characters, four of get_item's default pages): chapters with headings,
    every paragraph about lighthouses, and one unique sentence (NEEDLE) in chapter NEEDLE_CHAPTER."""
    parts: list[str] = ["# The long logbook"]
    for n in range(1, chapters + 1):
        parts.append(f"## Chapter {n}: watch {n}")
        for k in range(6):
            parts.append(f"Watch {n}.{k}: the lighthouse lamp burned steadily through the night while the keeper "
                         f"recorded wind, swell and passing ships in the logbook, entry {n * 10 + k}, and noted "
                         f"how the beam swept the reef at intervals of exactly {5 + (n + k) % 7} seconds.")
        if n == NEEDLE_CHAPTER:
            parts.append(NEEDLE)
    return "\n\n".join(parts)


def page_html(title: str, blocks: list[tuple[str, str]]) -> str:
    body = "".join(f"<{tag}>{text}</{tag}>" for tag, text in blocks)
    return f"<!doctype html><html><head><title>{title}</title></head><body><article><h1>{title}</h1>{body}" \
           f"</article></body></html>"


@dataclass
class Library:
    pages: dict[str, str] = field(default_factory=dict)  # url -> item id
    notes: dict[str, str] = field(default_factory=dict)  # title -> item id
    pdf: str = ""
    long: str = ""
    long_text: str = ""


def ok(r: Any) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return dict(r.json())


def build_library(c: Any, admin: Any, tmp_path: Path) -> Library:
    """The library, ingested through the REST API with the write token's client `c`."""
    lib = Library()
    for url, (title, blocks) in PAGES.items():
        lib.pages[url] = ok(c.post("/api/v1/ingest", json={"kind": "page", "url": url, "auto_transform": False,
                                                            "html": page_html(title, blocks)}))["user_item_id"]
    for title, (when, text) in NOTES.items():
        item = ok(c.post("/api/v1/ingest", json={"kind": "text", "title": title, "text": text,
                                                  "auto_transform": False}))["user_item_id"]
        admin.sql("UPDATE user_items SET created_at = :t WHERE id = :i", t=when, i=item)
        lib.notes[title] = item
    lib.long_text = long_note()
    lib.long = ok(c.post("/api/v1/ingest", json={"kind": "text", "title": "Logbook", "text": lib.long_text,
                                                  "auto_transform": False}))["user_item_id"]
    lib.pdf = upload_pdf(c, tmp_path / "lighthouse-report.pdf", PDF_PAGES)
    wait_ready(c, [lib.long, lib.pdf])
    return lib


def upload_pdf(c: Any, path: Path, pages: list[str]) -> str:
    """A PDF through the upload handshake (sign, put, finalize); its item id."""
    data = fm.file_bytes(fm.make_text_pdf(path, pages, title="Lighthouse board report"))
    signed = ok(c.post("/api/v1/uploads/signed-url", json={"mime": "application/pdf", "size": len(data),
                                                            "filename": path.name}))
    put = httpx.put(signed["signed_url"], content=data, headers={"Content-Type": "application/pdf"}, timeout=60)
    assert put.status_code == 200, put.text
    done = ok(c.post(f"/api/v1/uploads/{signed['finalize_endpoint']}", json={
        "path": signed["path"], "mime": "application/pdf", "size": len(data), "filename": path.name}))
    return str(done["user_item_id"])


def wait_ready(c: Any, ids: list[str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    for item_id in ids:
        while True:
            status = ok(c.get(f"/api/v1/items/{item_id}", params={"max_chars": 1}))["status"]
            if status == "ready":
                break
            assert status != "failed" and time.monotonic() < deadline, (item_id, status)
            time.sleep(0.2)
