"""Text from PDFs and images: the PDF text layer per page, OCR (rapidocr) where a page has none.

All functions here are synchronous and CPU-bound; callers run them in a worker thread. pdfium is
not thread-safe, so every pdfium call holds `_PDFIUM_LOCK`; OCR runs under its own lock.
"""

from __future__ import annotations

import itertools
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from statistics import median_high
from typing import Any

from PIL import Image, ImageOps

from lev.core.errors import ApiError, extraction_failed
from lev.store.locations import Outline, joined_pages, normalize_text, reflow

MAX_IMAGE_PIXELS = 50_000_000
Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS

MAX_PDF_PAGES = 2000  # pages beyond this are not read (metadata says truncated)
MAX_OCR_PAGES = 200  # scanned pages beyond this are not OCRed (metadata says ocr_skipped)
RENDER_DPI = 200
MAX_RENDER_PIXELS = 12_000_000  # a rendered page is scaled down to fit this
MAX_OCR_PIXELS = 16_000_000  # an image is scaled down to fit this before OCR
MIN_TEXT_CHARS = 16  # a page with fewer non-blank characters in its text layer is OCRed
INLINE_OCR_PAGES = 2  # a PDF needing OCR on more pages than this is finished by the worker

_PDFIUM_LOCK = threading.Lock()
_OCR_LOCK = threading.Lock()
_OCR_ENGINE: Any = None


@dataclass
class Page:
    """One PDF page's text; `ocr` is true when the text came from OCR of the rendered page."""

    number: int
    text: str
    ocr: bool


def _ocr_engine() -> Any:
    global _OCR_ENGINE
    if _OCR_ENGINE is None:
        with _OCR_LOCK:
            if _OCR_ENGINE is None:
                from rapidocr import RapidOCR

                # The shipped config upscales the short side to 736 px, which makes small images slow;
                # bounding the long side instead keeps pages accurate and small images fast. The models are
                # the ones the package ships (PP-OCRv6 small): nothing is downloaded.
                _OCR_ENGINE = RapidOCR(params={"Global.log_level": "warning", "Det.limit_type": "max",
                                               "Det.limit_side_len": 1600})
    return _OCR_ENGINE


def _join_lines(result: list[Any] | None) -> str:
    """Join OCR boxes into text in reading order: rows top to bottom, boxes left to right."""
    if not result:
        return ""
    boxes = []
    for box, text, _score in result:
        ys = [pt[1] for pt in box]
        xs = [pt[0] for pt in box]
        boxes.append((min(ys), max(ys), min(xs), str(text)))
    boxes.sort(key=lambda b: (b[0] + b[1]) / 2)
    rows: list[list[tuple[float, float, float, str]]] = []
    for b in boxes:
        centre = (b[0] + b[1]) / 2
        if rows:
            last = rows[-1]
            top = sum(r[0] for r in last) / len(last)
            bottom = sum(r[1] for r in last) / len(last)
            if top <= centre <= bottom:
                last.append(b)
                continue
        rows.append([b])
    return "\n".join(" ".join(b[3] for b in sorted(row, key=lambda b: b[2])) for row in rows)


def ocr_image(image: Image.Image) -> str:
    """OCR a Pillow image; returns lines in reading order ("" when nothing is found)."""
    import numpy as np

    img = image.convert("RGB")
    if img.width * img.height > MAX_OCR_PIXELS:
        factor = (MAX_OCR_PIXELS / (img.width * img.height)) ** 0.5
        img = img.resize((max(1, int(img.width * factor)), max(1, int(img.height * factor))))
    engine = _ocr_engine()
    with _OCR_LOCK:
        found = engine(np.asarray(img))
    if found.boxes is None:
        return ""
    return _join_lines(list(zip(found.boxes.tolist(), found.txts, found.scores, strict=True)))


def _meaningful(text: str) -> int:
    return sum(1 for ch in text if not ch.isspace())


def _line_place(textpage: Any, start: int, end: int) -> tuple[float, float, float, float]:
    """Where a text layer's line `[start, end)` starts and ends, how tall it is and how far its first three
    characters climb, from their loose boxes and the last three's (the font's ascent and descent, alike for every
    glyph of a size): the median bottom of each three, their median height, the first three's spread of bottoms.
    A line's start and end differ where pdfium joined a word hyphenated across two lines into one."""
    head = [textpage.get_charbox(i, loose=True) for i in range(start, min(start + 3, end))]
    tail = [textpage.get_charbox(i, loose=True) for i in range(max(end - 3, start), end)]
    climb = max(b[1] for b in head) - min(b[1] for b in head)
    heights = [b[3] - b[1] for b in head + tail]
    return median_high([b[1] for b in head]), median_high([b[1] for b in tail]), median_high(heights), climb


def _lines(raw: str) -> str:
    """pdfium's text with its line ends as `\\n`."""
    return raw.replace("\r\n", "\n").replace("\r", "\n")


def _with_paragraph_gaps(textpage: Any) -> str:
    """A page's text layer with a blank line where the next line sits lower than a line and a half of the page's
    usual spacing (the median step between lines; with fewer than three steps, 1.2 line heights): a paragraph set
    apart only by vertical space, for which pdfium writes no blank line. A line higher than the one before (the
    next column) is left to `reflow`, and so is a page whose lines climb (rotated text). The plain text when the
    layer's characters and its text do not line up one for one."""
    raw = textpage.get_text_range()
    if textpage.count_chars() != len(raw):
        return _lines(raw)
    lines: list[tuple[str, tuple[float, float, float, float] | None]] = []
    pos = 0
    for line in raw.replace("\r\n", "\n\x00").replace("\r", "\n").split("\n"):
        body = line.lstrip("\x00")  # \x00 keeps \r\n's two characters in the count
        at = pos + len(line) - len(body)
        first = at + len(body) - len(body.lstrip())
        last = at + len(body.rstrip())
        lines.append((body, _line_place(textpage, first, last) if last > first else None))
        pos += len(line) + 1
    placed = [place for _, place in lines if place is not None]
    steps = [a[1] - b[0] for a, b in itertools.pairwise(placed) if a[1] - b[0] > 0]
    height = median_high([place[2] for place in placed]) if placed else 0.0
    if not steps or median_high([place[3] for place in placed]) > height / 2:  # no steps, or lines that climb: rotated
        return "\n".join(body for body, _ in lines)
    usual = median_high(steps) if len(steps) >= 3 else 1.2 * height
    out: list[str] = []
    above: float | None = None
    for body, place in lines:
        if place is not None:
            if above is not None and above - place[0] > 1.5 * usual and out and out[-1].strip():
                out.append("")
            above = place[1]
        out.append(body)
    return "\n".join(out)


def _read_page(pdf: Any, index: int, want_render: bool, gaps: bool = True) -> tuple[str, Image.Image | None]:
    """Text layer of one page (with a blank line at each paragraph gap unless not `gaps`) and, when it is
    near-empty and `want_render`, the rendered page."""
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        if gaps:
            text = _with_paragraph_gaps(textpage)
        else:
            text = _lines(textpage.get_text_range())
        textpage.close()
        if _meaningful(text) >= MIN_TEXT_CHARS or not want_render:
            return text.strip(), None
        width, height = page.get_size()
        scale = RENDER_DPI / 72
        pixels = width * scale * height * scale
        if pixels > MAX_RENDER_PIXELS:
            scale *= (MAX_RENDER_PIXELS / pixels) ** 0.5
        return text.strip(), page.render(scale=scale).to_pil()
    finally:
        page.close()


def _open_pdf(path: Path | str) -> Any:
    """The pdfium document (the caller holds _PDFIUM_LOCK), or 422 extraction_failed."""
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        raise extraction_failed(f"The PDF could not be read (corrupt or password-protected): {exc}") from None


def extract_pdf(path: Path | str) -> tuple[list[Page], dict[str, Any]]:
    """Per-page text of a PDF, OCRing pages without a text layer; metadata has page_count, title, author."""
    import pypdfium2 as pdfium

    pages: list[Page] = []
    meta: dict[str, Any] = {}
    ocr_pages = ocr_skipped = 0
    with _PDFIUM_LOCK:
        pdf = _open_pdf(path)
    try:
        with _PDFIUM_LOCK:
            count = len(pdf)
            info = pdf.get_metadata_dict(skip_empty=True)
        meta["page_count"] = count
        for key in ("Title", "Author"):
            if info.get(key, "").strip():
                meta[key.lower()] = info[key].strip()
        if count > MAX_PDF_PAGES:
            meta["truncated"] = True
        for index in range(min(count, MAX_PDF_PAGES)):
            with _PDFIUM_LOCK:
                text, image = _read_page(pdf, index, ocr_pages < MAX_OCR_PAGES)
            if image is None:
                if _meaningful(text) < MIN_TEXT_CHARS:
                    ocr_skipped += 1
                pages.append(Page(index + 1, text, False))
                continue
            ocr_pages += 1
            pages.append(Page(index + 1, ocr_image(image) or text, True))
    except pdfium.PdfiumError as exc:
        raise extraction_failed(f"The PDF could not be read: {exc}") from None
    finally:
        with _PDFIUM_LOCK:
            pdf.close()
    if ocr_pages:
        meta["ocr_pages"] = ocr_pages
    if ocr_skipped:
        meta["ocr_skipped"] = ocr_skipped
    return pages, meta


def extract_image(path: Path | str) -> tuple[str, dict[str, Any]]:
    """OCR text of an image (first frame) and its metadata: width, height, format."""
    try:
        with warnings.catch_warnings():
            # Pillow only warns between MAX_IMAGE_PIXELS and twice that; refuse there too.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(path)
        with img:
            width, height = img.size
            meta: dict[str, Any] = {"width": width, "height": height, "format": img.format}
            if width * height > MAX_IMAGE_PIXELS:
                raise extraction_failed(f"image too large: {width}x{height} pixels exceeds {MAX_IMAGE_PIXELS}.")
            frames = getattr(img, "n_frames", 1)
            if frames > 1:
                meta["frames"] = frames
            img.load()
            image = ImageOps.exif_transpose(img) or img
            if image.mode in ("RGBA", "LA", "P", "PA"):
                rgba = image.convert("RGBA")
                flat = Image.new("RGB", rgba.size, "white")
                flat.paste(rgba, mask=rgba.getchannel("A"))
                image = flat
            text = ocr_image(image)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise extraction_failed(f"image too large: {exc}") from None
    except ApiError:
        raise
    except (OSError, ValueError, SyntaxError) as exc:
        raise extraction_failed(f"The image could not be read: {exc}") from None
    return text, meta


def page_texts(path: Path | str) -> list[tuple[int, str]]:
    """Each page's text layer (no OCR), as (page number, text): where a stored PDF's pages start is found again from
    them (`tasks.housekeeping.locate_pdf_pages`)."""
    with _PDFIUM_LOCK:
        pdf = _open_pdf(path)
        try:
            # as read when those PDFs were stored: with no paragraph gaps
            return [(i + 1, _read_page(pdf, i, False, gaps=False)[0]) for i in range(min(len(pdf), MAX_PDF_PAGES))]
        finally:
            pdf.close()


def pdf_plan(path: Path) -> tuple[int, int]:
    """(page count, pages without a usable text layer) of a PDF; 422 extraction_failed when unreadable."""
    import pypdfium2 as pdfium

    with _PDFIUM_LOCK:
        pdf = _open_pdf(path)
        try:
            count = len(pdf)
            textless = 0
            for index in range(min(count, MAX_PDF_PAGES)):
                page = pdf[index]
                try:
                    tp = page.get_textpage()
                    if _meaningful(tp.get_text_range()) < MIN_TEXT_CHARS:
                        textless += 1
                    tp.close()
                finally:
                    page.close()
                if textless > INLINE_OCR_PAGES:
                    break
        except pdfium.PdfiumError as exc:
            raise extraction_failed(f"The PDF could not be read: {exc}") from None
        finally:
            pdf.close()
    if count == 0:
        raise extraction_failed("The PDF has no pages.")
    return count, textless


@dataclass(frozen=True)
class Extracted:
    """A document's text (normalised; a PDF's pages apart by a blank line), its metadata and its outline (where
    each PDF page starts in the text)."""

    text: str
    metadata: dict[str, Any]
    outline: Outline


def extract(path: Path, mime: str) -> Extracted:
    """Text, metadata and outline of a document file, PDF or image (blocking; run in a thread)."""
    if mime == "application/pdf":
        pages, meta = extract_pdf(path)
        text, outline = joined_pages([(p.number, reflow(p.text)) for p in pages])  # lines made paragraphs
        return Extracted(text, meta, outline)
    text, meta = extract_image(path)
    return Extracted(normalize_text(text), meta, Outline())
