"""Where a highlight's words are (lev.highlights.locate) and how the reader view cuts and marks the text
(lev.highlights.reader), without a server."""

from __future__ import annotations

import pytest

from lev.core.errors import ApiError
from lev.highlights.locate import locate
from lev.highlights.markdown import filename, render
from lev.highlights.reader import MARKS_PER_RUN, PART_CHARS, PART_LINES, boundaries, part_of, view

BODY = "The tide turns twice a day.\nThe tide  pools\nhold sea stars. The tide is high. 🐚 The tide"


def test_offsets_that_hold_the_words_are_kept_else_the_nearest_occurrence_is_found() -> None:
    first = BODY.index("The tide")
    assert locate(BODY, "The tide") == (first, first + 8)  # no offsets: the first occurrence
    third = BODY.index("The tide is")
    assert locate(BODY, "The tide", third, third + 8) == (third, third + 8)  # offsets that hold the words
    last = BODY.rindex("The tide")
    assert locate(BODY, "The tide", last - 3, last + 5) == (last, last + 8)  # the nearest to wrong offsets
    assert locate(BODY, "The tide", third + 2) == (third, third + 8)  # a start alone is a hint too
    assert BODY[slice(*locate(BODY, "The tide", None, len(BODY)))] == "The tide"


def test_whitespace_runs_match_any_whitespace_and_code_points_count_as_one() -> None:
    start, end = locate(BODY, "tide pools hold\n sea stars.")  # the live page's spaces and breaks
    assert BODY[start:end] == "tide  pools\nhold sea stars."
    start, end = locate(BODY, " 🐚 The ")
    assert BODY[start:end] == "🐚 The" and end - start == 5  # the shell is one character (a code point)


@pytest.mark.parametrize(("words", "code", "status", "says"), [
    ("The sea is dry", "words_not_found", 409, "not in the item"), ("tides turn", "words_not_found", 409,
                                                                    "not in the item"),
    ("   ", "invalid_body", 400, "some words")])
def test_words_not_in_the_text_are_refused_saying_so(words: str, code: str, status: int, says: str) -> None:
    """Words the item's text (its state) lacks are a conflict, 409; no words at all are a bad body, 400."""
    with pytest.raises(ApiError) as err:
        locate(BODY, words)
    assert (err.value.code, err.value.status) == (code, status)
    assert says in (err.value.message or "")


def test_parts_break_at_lines_and_every_offset_has_one_part() -> None:
    text = ("word " * 30 + "\n") * 2000  # about 300,000 characters
    starts = boundaries(text)
    assert starts[0] == 0 and all(b - a <= PART_CHARS for a, b in zip(starts, starts[1:], strict=False))
    assert all(text[s - 1] == "\n" for s in starts[1:])
    assert part_of(starts, 0) == 1 and part_of(starts, starts[3]) == 4 and part_of(starts, len(text) - 1) == len(starts)
    assert boundaries("x" * (PART_CHARS * 2 + 5)) == [0, PART_CHARS, 2 * PART_CHARS]  # no break: cut anyway


def test_the_view_splits_runs_where_highlights_start_and_end() -> None:
    text = "alpha beta gamma\ndelta epsilon"
    marks = [{"id": "a", "char_start": 6, "char_end": 16}, {"id": "b", "char_start": 11, "char_end": 23}]
    v = view(text, marks)
    assert (v.part, v.parts, v.start, v.end, v.total_chars) == (1, 1, 0, len(text), len(text))
    first, second = v.paragraphs
    assert [(r.at, r.text, r.highlight_ids, r.anchors) for r in first.runs] == [
        (0, "alpha ", [], []), (6, "beta ", ["a"], ["a"]), (11, "gamma", ["a", "b"], ["b"])]
    assert [(r.at, r.text, r.highlight_ids) for r in second.runs] == [(17, "delta ", ["b"]), (23, "epsilon", [])]
    for p in v.paragraphs:
        for r in p.runs:
            assert text[r.at:r.at + len(r.text)] == r.text  # every run knows its place in the text


def test_markdown_quotes_highlights_with_notes_below_and_names_the_file() -> None:
    item = {"id": "0b0e8c1e-0000-4000-8000-000000000000", "title": "Tide pools", "url": "https://example.com/t",
            "kind": "url", "created_at": "2026-11-27T09:00:00+00:00", "text": "The tide turns.\nTwice a day."}
    md = render(item, [{"text": "The tide turns.\nTwice", "note": "Remember the moon."}])
    assert md.startswith('---\ntitle: "Tide pools"\nsource: "https://example.com/t"\n')
    assert "## Highlights\n\n> The tide turns.\n> Twice\n\nRemember the moon.\n" in md
    assert md.rstrip().endswith("## Text\n\nThe tide turns.\n\nTwice a day.")  # a paragraph a line
    assert filename("Tide: pools / rocks?", "x") == "Tide pools rocks.md" and filename(None, "abc") == "abc.md"


def test_the_search_agrees_with_the_whitespace_pattern_on_random_texts() -> None:
    import random
    import re

    rng = random.Random(47)
    spaces, tokens = [" ", "\n", "\t", "\u3000", "\xa0", "  ", "\r\n", "\x1c"], ["a", "b", "ab", "é", "🐚"]
    for _ in range(2000):
        body = "".join(rng.choice(spaces) * rng.randint(0, 2) + rng.choice(tokens) for _ in range(rng.randint(0, 30)))
        words = " ".join(rng.choice(tokens) for _ in range(rng.randint(1, 3)))
        pattern = re.compile(r"\s+".join(re.escape(w) for w in words.split()))
        spans = [m.span() for m in pattern.finditer(body)]
        hint = rng.randint(0, len(body)) if rng.random() < 0.7 else None
        try:
            found: tuple[int, int] | None = locate(body, words, hint)
        except ApiError:
            found = None
        assert (found is None) == (not spans), (body, words)
        if found is not None:
            assert pattern.fullmatch(body, *found), (body, words, found)
            if hint is None:
                assert found == spans[0]
            else:  # no occurrence, overlapping ones included, lies nearer the hint
                starts = [i for i in range(len(body)) if pattern.match(body, i)]
                assert abs(found[0] - hint) == min(abs(s - hint) for s in starts), (body, words, hint)


def test_locating_is_linear_in_the_text_at_the_maxima() -> None:
    """The word-by-word pattern took text length times words: 14 s for 1,000 words in 200,000 characters, minutes
    at the maxima (a 1,000,000-character text, a 20,000-character highlight). Now a plain search: well under 1 s
    each here, bounded at 5 s in all for a busy machine."""
    import time

    body = "a " * 500_000
    started = time.monotonic()
    for words, hint in [("a " * 9_999 + "b", None), ("a " * 5_000 + "b " + "a " * 4_998, 999_000),
                        ("b" + " a" * 9_999, 10), ("a " * 999 + "b", 500_000)]:
        with pytest.raises(ApiError):
            locate(body, words, hint)
    assert locate(body, "a a a", 999_990) == (999_990, 999_995)
    assert time.monotonic() - started < 5


def test_the_view_agrees_with_a_plain_reading_and_is_bounded_on_pathological_parts() -> None:
    """Issue 47's audit: each paragraph looked at every page start and moment, each run at every highlight: a PDF
    part of one-letter lines took 0.9 s, 2,000 nested highlights 0.5 s, on every view of the page."""
    import random
    import time

    rng = random.Random(7)
    for _ in range(200):
        text = "".join(rng.choice(["ab", " ", "\n", "cd"]) for _ in range(rng.randint(1, 60)))
        marks = []
        for n in range(rng.randint(0, 6)):
            a = rng.randrange(len(text))
            marks.append({"id": f"h{n}", "char_start": a, "char_end": rng.randint(a + 1, len(text))})
        pages = sorted({(rng.randrange(len(text)), p) for p in range(3)})
        v = view(text, marks, pages=pages)
        for p in v.paragraphs:
            line_end = p.at + sum(len(r.text) for r in p.runs)
            assert p.page == next((n for at, n in pages if p.at <= at <= line_end), None)
            for r in p.runs:
                covering = [h["id"] for h in marks if h["char_start"] < r.at + len(r.text) and h["char_end"] > r.at]
                assert r.highlight_ids == covering and r.anchors == [
                    h["id"] for h in marks if h["char_start"] == r.at]
    lines = "x\n" * 15_000
    pages = [(2 * n, n + 1) for n in range(2_000)]
    nested = [{"id": f"h{n}", "char_start": n, "char_end": 30_000 - n} for n in range(2_000)]
    started = time.perf_counter()
    v = view(lines, nested, pages=pages, moments=[(2 * n, float(n)) for n in range(2_000)])
    assert time.perf_counter() - started < 2
    assert len(v.paragraphs) == PART_LINES and v.parts == 8  # a part ends after its 2,000th line
    assert v.paragraphs[0].page == 1 and v.paragraphs[1].moment == 1.0
    assert len(v.paragraphs[900].runs[0].highlight_ids) == MARKS_PER_RUN  # the oldest, first marked


def test_markdown_escapes_raw_html_and_keeps_markdown() -> None:
    """Issue 47 item 8: texts and notes (a shared folder's members' too) went into the Markdown as raw HTML, which a
    note tool that renders HTML would run. A CommonMark renderer with HTML on now makes words of it."""
    import yaml
    from markdown_it import MarkdownIt

    hostile = "<script>alert(1)</script> <img src=x onerror=alert(2)> <!-- hidden -->"
    item = {"id": "0b0e8c1e-0000-4000-8000-000000000000", "title": f"Title {hostile}",
            "url": 'https://example.com/a"><script>alert(3)</script>', "kind": "text",
            "created_at": "2026-11-27T09:00:00+00:00",
            "text": f"**Bold** and [a link](https://example.com), a < b\n{hostile}"}
    md = render(item, [{"text": f"quoted {hostile}", "note": f"note {hostile}"}])
    front, body = md.split("\n---\n", 1)
    assert "<" not in front and yaml.safe_load(front.removeprefix("---\n"))["title"] == item["title"]
    html = MarkdownIt("commonmark", {"html": True}).render(body)
    assert "<script" not in html and "<img" not in html and "<!--" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # said, not run
    assert "<strong>Bold</strong>" in html and '<a href="https://example.com">a link</a>' in html and "a &lt; b" in html
