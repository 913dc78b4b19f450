"""lev.store.locations and migration 0015's backfill: the stored text's one form, outlines, chunk locations; chunks
stored before locations existed get them from the text (white space made the stored form, a transcript's words
found across differing white space)."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lev.ingest.chunking import passages, timed_passages
from lev.store.locations import (
    Outline,
    joined_pages,
    line_headings,
    locate,
    location,
    markdown_headings,
    normalize_whitespace,
)

MIGRATION = Path(__file__).resolve().parents[2] / "lev/store/migrations/versions/0015_locations.py"


def migration() -> Any:
    spec = importlib.util.spec_from_file_location("lev_migration_0015", MIGRATION)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \t\n\r\u00a0\u200b\u2028\x1c.#")), max_size=60))
def test_normalising_twice_changes_nothing(text: str) -> None:
    once = normalize_whitespace(text)
    assert normalize_whitespace(once) == once


def test_locate_finds_overlapping_chunks_in_order() -> None:
    text = "one two three. one two three. four"
    assert locate(text, ["one two three.", "three. one two three.", "four", "missing"]) == [
        (0, 14), (8, 29), (30, 34), None]
    assert locate("abab", ["ab", "ab"]) == [(0, 2), (2, 4)]


def test_outline_gives_pages_and_the_heading_above() -> None:
    text, outline = joined_pages([(1, "First page."), (2, "  "), (3, "Third\r\npage.  ")])
    assert text == "First page.\n\nThird\npage." and outline.pages == ((0, 1), (13, 3))
    outline = outline.with_headings([(13, "Part two")])
    assert location((2, 5), outline) == location((2, 5), outline)
    where = location((5, 18), outline)
    assert (where.page, where.page_end, where.heading) == (1, 3, None)
    assert location((13, 18), outline).heading == "Part two"
    assert Outline.from_json(outline.to_json()) == outline and Outline().to_json() is None


def test_markdown_and_html_headings() -> None:
    text = "# Title\nintro\n\n## Part *one* ##\nbody\n#not a heading\n####### too deep"
    assert markdown_headings(text) == [(0, "Title"), (15, "Part *one*")]
    assert line_headings("Intro\nThe lens\nThe lens room\nEnd", ["The  lens", "Nowhere", "End"]) == [
        (6, "The lens"), (29, "End")]


def test_passages_slice_their_own_text() -> None:
    raw = "# Log\n\n\n" + "\n\n".join(f"## Day {n}\n" + "The keeper   wrote.  " * 60 for n in range(8))
    p = passages(raw, "Log", headings=["Day 3"])
    assert p.text == normalize_whitespace(raw) and len(p.bodies) > 4
    for body, where in zip(p.bodies, p.locations, strict=True):
        assert p.text[where.char_start:where.char_end] == body
        assert where.heading is not None and where.heading.startswith(("Log", "Day"))
    timed = timed_passages([{"start": n, "end": n + 1, "text": f"  segment {n} text "} for n in range(300)], None)
    assert timed.text.splitlines()[0] == "segment 0 text" and timed.times and len(timed.times) == len(timed.bodies)
    assert all(timed.text[w.char_start:w.char_end] == b for b, w in zip(timed.bodies, timed.locations, strict=True))


def test_backfill_locates_chunks_stored_before_locations(server, api, user, admin) -> None:  # type: ignore[no-untyped-def]
    c = api(user.token(write=True))
    raw = "# Harbour log\n\n" + "\n\n".join(f"## Week {n}\n" + " ".join(
        f"The lamp was lit at dusk on day {d} of week {n}.  " for d in range(30)) for n in range(6))
    item = c.post("/api/v1/ingest", json={"kind": "text", "text": raw, "auto_transform": False}).json()
    content = item["content_id"]
    stored = c.get(f"/api/v1/items/{item['user_item_id']}").json()["text"]
    assert stored == normalize_whitespace(raw)
    before = admin.sql("SELECT c.id, l.char_start, l.char_end, l.heading FROM chunks c JOIN chunk_locations l "
                       "ON l.chunk_id = c.id WHERE c.content_id = :c ORDER BY c.ord", c=content)
    # as an older Lev stored it: the text as sent, no locations
    admin.sql("DELETE FROM chunk_locations WHERE chunk_id IN (SELECT id FROM chunks WHERE content_id = :c)", c=content)
    admin.sql("UPDATE contents SET text = :t, outline = NULL WHERE id = :c", t=raw, c=content)
    # a recording transcribed by an older Lev: the provider's text, its chunks cut from the segments' lines
    audio = str(uuid.uuid4())
    admin.sql("INSERT INTO contents (id, kind, title, transcript, status, metadata) VALUES "
              "(:c, 'audio', 'Talk', 'Hello there. General  Kenobi! You are a bold one.', 'ready', '{}')", c=audio)
    admin.sql("INSERT INTO chunks (id, content_id, ord, title, text, embedding) VALUES "
              "(:i, :c, 0, 'Talk', :t, CAST(array_fill(0.1, ARRAY[384]) AS vector))",
              i=str(uuid.uuid4()), c=audio, t="Hello there.\nGeneral Kenobi!")

    admin.run(lambda s: s.run_sync(lambda sync: migration().backfill(sync.connection())))

    assert admin.sql("SELECT text FROM contents WHERE id = :c", c=content)[0][0] == stored
    after = admin.sql("SELECT c.id, l.char_start, l.char_end, l.heading FROM chunks c JOIN chunk_locations l "
                      "ON l.chunk_id = c.id WHERE c.content_id = :c ORDER BY c.ord", c=content)
    assert after == before and any(h == "Week 3" for *_, h in after) and len(after) > 4
    transcript, chunk_text, start, end = admin.sql(
        "SELECT ct.transcript, c.text, l.char_start, l.char_end FROM contents ct JOIN chunks c ON c.content_id = ct.id"
        " JOIN chunk_locations l ON l.chunk_id = c.id WHERE ct.id = :c", c=audio)[0]
    assert transcript == "Hello there. General Kenobi! You are a bold one."
    assert transcript[start:end] == chunk_text == "Hello there. General Kenobi!"
    admin.sql("DELETE FROM contents WHERE id = :c", c=audio)


def test_pages_found_again_for_an_older_pdf(server, api, user, admin, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from lev.tasks import housekeeping
    from tests.fixtures_answers import PDF_PAGES, upload_pdf, wait_ready

    c = api(user.token(write=True))
    pdf = upload_pdf(c, tmp_path / "report.pdf", PDF_PAGES)
    wait_ready(c, [pdf])
    content = admin.sql("SELECT content_id FROM user_items WHERE id = :i", i=pdf)[0][0]
    query = ("SELECT l.chunk_id, l.page, l.page_end FROM chunk_locations l JOIN chunks c ON c.id = l.chunk_id "
             "WHERE c.content_id = :c ORDER BY c.ord")
    before = admin.sql(query, c=content)
    assert len(before) >= 3 and before[0][1] == 1 and before[-1][2] == len(PDF_PAGES)
    # as migration 0015 leaves a PDF stored before pages were kept: characters and headings, no pages
    admin.sql("UPDATE chunk_locations SET page = NULL, page_end = NULL WHERE chunk_id IN "
              "(SELECT id FROM chunks WHERE content_id = :c)", c=content)
    admin.sql("UPDATE contents SET outline = NULL WHERE id = :c", c=content)
    while admin.run_coro(housekeeping.locate_pdf_pages(admin.job_ctx())):
        pass
    assert admin.sql(query, c=content) == before
    hit = c.get("/api/v1/search", params={"q": "Fresnel lens cracked by frost", "item_id": pdf,
                                          "mode": "keyword"}).json()["results"][0]
    assert hit["location"]["page"] <= 3 <= hit["location"]["page_end"]
    # a PDF whose file is gone is marked, never read again
    admin.sql("UPDATE chunk_locations SET page = NULL WHERE chunk_id IN (SELECT id FROM chunks WHERE content_id = :c)",
              c=content)
    stored = admin.sql("SELECT object_path FROM contents WHERE id = :c", c=content)[0][0]
    admin.sql("UPDATE contents SET outline = NULL, object_path = :p WHERE id = :c", p="gone/nowhere.pdf", c=content)
    try:
        while admin.run_coro(housekeeping.locate_pdf_pages(admin.job_ctx())):
            pass
        assert admin.sql("SELECT outline FROM contents WHERE id = :c", c=content)[0][0] == {"pages_unknown": True}
    finally:  # the server is shared with other test files (a backup lists missing objects)
        admin.sql("UPDATE contents SET object_path = :p WHERE id = :c", p=stored, c=content)


def test_page_outline_without_a_text_layer_on_some_pages() -> None:
    from lev.store.locations import page_outline

    text = "Page one text.\n\nScanned words of two.\n\nPage three text."
    found = page_outline(text, [(1, "Page one text."), (2, ""), (3, "Page three  text.")])
    assert found.pages == ((0, 1), (16, 2), (39, 3))
    assert page_outline("A\n\nB", [(1, "A"), (2, "B")]).pages == ((0, 1), (3, 2))


def test_an_outline_keeps_at_most_its_cap_of_headings() -> None:
    """Issue 47's audit: a text of 250,000 "# a" lines kept every one (3.7 MB of outline, read again for every
    highlight a search matched, 2.3 s a search)."""
    from lev.store.locations import MAX_HEADINGS, Outline, markdown_headings

    text = "# a\n" * 250_000
    found = markdown_headings(text)
    assert len(found) == MAX_HEADINGS and found[:2] == [(0, "a"), (4, "a")]
    merged = Outline(pages=((0, 1),)).with_headings((n, f"h{n}") for n in range(10 * MAX_HEADINGS))
    assert len(merged.headings) == MAX_HEADINGS and merged.headings[0] == (0, "h0") and merged.pages == ((0, 1),)
