"""The words a search hit's line says of its place: a page, a slide, a sheet's rows, a time; no heading said twice."""

from __future__ import annotations

from lev.handlers.page_words import hit_heading, where


def test_where_names_pages_slides_rows_and_times() -> None:
    assert where({"page": 3}) == "p. 3"
    assert where({"page": 3, "page_end": 4}) == "pp. 3–4"
    assert where({"slide": 4, "heading": "Costs"}) == "Slide 4"
    assert where({"sheet": "Budget", "row_start": 2, "row_end": 9}) == "Sheet Budget, rows 2–9"
    assert where({"sheet": "Notes", "row_start": 2, "row_end": 2}) == "Sheet Notes, row 2"
    assert where({"sheet": "Empty"}) == "Sheet Empty"
    assert where({"start_sec": 134.6}) == "2:14"
    assert where(None) == ""


def test_a_heading_that_repeats_the_title_or_the_sheet_is_not_said_again() -> None:
    assert hit_heading({"title": "Q3 plan", "location": {"heading": "Budget > Boats"}}) == "Budget > Boats"
    assert hit_heading({"title": "Seal  colony", "location": {"heading": "seal colony"}}) is None
    assert hit_heading({"title": "stations", "location": {"sheet": "Notes", "heading": "Notes"}}) is None
    assert hit_heading({"title": "stations", "location": {}}) is None
