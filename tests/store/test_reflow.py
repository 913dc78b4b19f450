"""A PDF page's lines become paragraphs (issue 51): lines that continue a sentence join, a word hyphenated at a
line's end joins whole (pdfium's U+FFFE mark too), a heading and a list item stay apart; a text stored as read
before this still has its pages found."""

from __future__ import annotations

from lev.store.locations import joined_pages, page_outline, reflow

PAGE = ("Plankton\nCopepods swarm in the upper ocean at densities of ten\nthousand animals per cubic metre. They graze "
        "on diatoms and are in\nturn eaten by fish larvae and by the baleen whales of the\nsouthern seas.\nBiomass\n"
        "Their total mass exceeds that of all the humans on Earth, by some esti-\nmates several times over, and it "
        "moves up and down each day.\n• first point of a list\n• second point\nShort line ending here.\n"
        "Next paragraph starts with a long line that runs to the margin like this one does\nand ends here.")


def test_lines_become_paragraphs() -> None:
    assert reflow(PAGE).split("\n\n") == [
        "Plankton",
        "Copepods swarm in the upper ocean at densities of ten thousand animals per cubic metre. They graze on "
        "diatoms and are in turn eaten by fish larvae and by the baleen whales of the southern seas.",
        "Biomass",
        "Their total mass exceeds that of all the humans on Earth, by some estimates several times over, and it "
        "moves up and down each day.",
        "• first point of a list", "• second point", "Short line ending here.",
        "Next paragraph starts with a long line that runs to the margin like this one does and ends here."]


def test_pdfiums_hyphen_mark_joins_the_word_and_reflow_is_stable() -> None:
    assert "estimates several" in reflow(PAGE.replace("esti-\n", "esti\ufffe"))
    assert reflow(reflow(PAGE)) == reflow(PAGE) and reflow("one line") == "one line" and reflow("") == ""


def test_pages_are_found_in_both_stored_forms() -> None:
    pages = [(1, PAGE), (2, "Second page\nwith two lines of text that go on and on and on.")]
    for form in (pages, [(n, reflow(t)) for n, t in pages]):
        text, outline = joined_pages(form)
        assert page_outline(text, pages) == outline
