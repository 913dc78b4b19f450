"""PDF and image text extraction on generated files: text layer, OCR fallback, corrupt input, bombs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lev.core.errors import ApiError
from lev.ingest.documents import MAX_IMAGE_PIXELS, extract_image, extract_pdf

try:
    from tests import fixtures_media as fm
except ImportError:  # tests/ is not a package: pytest puts it on sys.path
    import fixtures_media as fm  # type: ignore[no-redef]


def words(text: str) -> set[str]:
    return {w.strip(".,:;").lower() for w in text.split()}


def test_text_pdf_pages_and_metadata(tmp_path: Path) -> None:
    pdf = fm.make_text_pdf(tmp_path / "t.pdf", ["Alpha page about lighthouses.\nSecond line of alpha.",
                                                 "Beta page (with parentheses) about tides.",
                                                 "Gamma page closing remarks here."])
    pages, meta = extract_pdf(pdf)
    assert meta["page_count"] == 3
    assert meta["title"] == "Lev Test Document"
    assert meta["author"] == "Lev Tests"
    assert [p.number for p in pages] == [1, 2, 3]
    assert not any(p.ocr for p in pages)
    assert "Alpha page about lighthouses." in pages[0].text
    assert "Second line of alpha." in pages[0].text
    assert "Beta page (with parentheses) about tides." in pages[1].text
    assert "Gamma" in pages[2].text and "Alpha" not in pages[2].text


def test_twenty_page_pdf_is_read_without_ocr(tmp_path: Path) -> None:
    texts = [f"Page {i}\n" + "\n".join(f"Line {j} of page {i}: the quick brown fox jumps over the lazy dog."
                                         for j in range(40)) for i in range(1, 21)]
    pdf = fm.make_text_pdf(tmp_path / "twenty.pdf", texts, title=None, author=None)
    pages, meta = extract_pdf(pdf)
    assert meta == {"page_count": 20}
    assert len(pages) == 20 and not any(p.ocr for p in pages)
    assert "Line 39 of page 20: the quick brown fox" in pages[19].text


def test_image_only_pdf_page_is_ocred(tmp_path: Path) -> None:
    pdf = fm.make_image_pdf(tmp_path / "scan.pdf", ["Scanned lighthouse keeper", "notes from the archive"])
    pages, meta = extract_pdf(pdf)
    assert meta["page_count"] == 1 and meta["ocr_pages"] == 1
    assert pages[0].ocr is True
    assert {"scanned", "lighthouse", "keeper", "notes", "archive"} <= words(pages[0].text)
    # reading order: the first line comes first
    assert pages[0].text.lower().index("lighthouse") < pages[0].text.lower().index("archive")


def test_png_ocr_and_metadata(tmp_path: Path) -> None:
    png = fm.make_text_png(tmp_path / "t.png", ["Hello Lev knowledge", "second line here"])
    text, meta = extract_image(png)
    assert meta == {"width": 1000, "height": 192, "format": "PNG"}
    assert {"hello", "lev", "knowledge", "second", "line", "here"} <= words(text)
    assert text.splitlines()[0].lower().startswith("hello")


def test_blank_image_has_no_text(tmp_path: Path) -> None:
    path = tmp_path / "blank.jpg"
    fm.text_image([], width=300).save(path, format="JPEG")
    text, meta = extract_image(path)
    assert text == "" and meta["format"] == "JPEG"


def test_corrupt_pdf_is_extraction_failed(tmp_path: Path) -> None:
    with pytest.raises(ApiError) as exc:
        extract_pdf(fm.make_corrupt_pdf(tmp_path / "bad.pdf"))
    assert (exc.value.status, exc.value.code) == (422, "extraction_failed")


def test_non_image_is_extraction_failed(tmp_path: Path) -> None:
    with pytest.raises(ApiError) as exc:
        extract_image(fm.make_exe(tmp_path / "x.png"))
    assert (exc.value.status, exc.value.code) == (422, "extraction_failed")


@pytest.mark.parametrize(("width", "height"), [(30000, 30000), (8000, 7000)])
def test_decompression_bomb_is_refused_quickly(tmp_path: Path, width: int, height: int) -> None:
    assert width * height > MAX_IMAGE_PIXELS
    bomb = fm.make_bomb_png(tmp_path / "bomb.png", width, height)
    assert bomb.stat().st_size < 2_000_000
    start = time.perf_counter()
    with pytest.raises(ApiError) as exc:
        extract_image(bomb)
    assert time.perf_counter() - start < 20  # refused from its header: decoding 900 megapixels takes minutes
    assert (exc.value.status, exc.value.code) == (422, "extraction_failed")
    assert "too large" in (exc.value.message or "")


def test_password_protected_pdf_is_extraction_failed(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    plain = fm.make_text_pdf(tmp_path / "plain.pdf", ["Secret page text for the vault."])
    writer = PdfWriter()
    for page in PdfReader(plain).pages:
        writer.add_page(page)
    writer.encrypt(user_password="open-sesame", owner_password="owner", algorithm="AES-128")
    locked = tmp_path / "locked.pdf"
    with open(locked, "wb") as fh:
        writer.write(fh)
    with pytest.raises(ApiError) as exc:
        extract_pdf(locked)
    assert (exc.value.status, exc.value.code) == (422, "extraction_failed")
    assert "password" in (exc.value.message or "")


def test_paragraphs_apart_only_by_vertical_space_are_read_apart(tmp_path: Path) -> None:
    from lev.ingest.documents import extract, page_texts

    first = ("The keeper wrote down the weather every morning at six o'clock and sent it to the harbour\n"
             "office by the first boat of the day, whatever the sea was doing, for forty years running along\n"
             "the coast, and never missed a single morning of it in all that time on the rock by the sea\n")
    second = ("The station closed in the spring when the light was made automatic, and the keeper moved to\n"
              "the town where he kept on writing down the weather every morning for his own pleasure.")
    pdf = fm.make_text_pdf(tmp_path / "gap.pdf", [first + "\n" + second, "Short line\n\n\nafter a gap"])
    text = extract(pdf, "application/pdf").text
    paragraphs = text.split("\n\n")
    assert paragraphs[0].startswith("The keeper") and paragraphs[0].endswith("on the rock by the sea"), paragraphs
    assert paragraphs[1].startswith("The station closed") and paragraphs[1].endswith("his own pleasure."), paragraphs
    assert paragraphs[2:] == ["Short line", "after a gap"], paragraphs
    # without its gap the first page is one paragraph: the lines run to the margin and go on
    joined = extract(fm.make_text_pdf(tmp_path / "no-gap.pdf", [first + second]), "application/pdf").text
    assert "\n\n" not in joined and "by the sea The station closed" in joined
    # the pages' text layers as PDFs stored before pages were kept read them: no blank lines added
    assert "\n\n" not in page_texts(pdf)[0][1]


def test_a_rotated_page_gets_no_paragraph_gaps_from_its_lines_lengths(tmp_path: Path) -> None:
    from lev.ingest.documents import extract

    lines = [" ".join(["keeper"] * n) for n in (3, 12, 4, 11, 3, 12, 5, 10)]  # each runs up the page
    text = extract(fm.make_text_pdf(tmp_path / "up.pdf", ["\n".join(lines)], rotated=True), "application/pdf").text
    assert "keeper" in text and "\n\n" not in text, text
