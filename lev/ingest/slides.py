"""Presentations read into a `Layout`, slide by slide (each slide marked with its number, its title the heading):
.pptx and .pptm by python-pptx (text frames, grouped shapes, tables, speaker notes; macros never run), .odp by lxml
on the package's content.xml."""

from __future__ import annotations

import io
import zipfile
from typing import Any

from lxml import etree
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.exc import PackageNotFoundError

from lev.core.errors import extraction_failed
from lev.ingest.containers import is_compound, open_zip, refuse_compound
from lev.ingest.layout import Document, Layout, one_line
from lev.ingest.words import ODF_NS, TEXT, odf_blocks, odf_open, odf_table, odf_words

ODP = "application/vnd.oasis.opendocument.presentation"
MAX_GROUP_DEPTH = 8
_BROKEN = (KeyError, ValueError, TypeError, AttributeError, IndexError, etree.XMLSyntaxError, zipfile.BadZipFile,
           PackageNotFoundError, EOFError, OSError)


def read(data: bytes, mime: str, name: str, max_chars: int) -> Document:
    return _odp(data, max_chars) if mime == ODP else _pptx(data, mime, max_chars)


def _pptx(data: bytes, mime: str, max_chars: int) -> Document:
    what = ".pptm file" if mime.endswith("macroenabled.12") else ".pptx file"
    if is_compound(data):
        raise refuse_compound(data, what)
    zf = open_zip(data, what, ["ppt/presentation.xml"])
    macros = any(n.lower().endswith("vbaproject.bin") for n in zf.namelist())
    zf.close()
    layout = Layout(max_chars)
    try:
        prs = Presentation(io.BytesIO(data))
        count = 0
        for number, slide in enumerate(prs.slides, start=1):
            count = number
            if layout.truncated:
                break
            title_shape = slide.shapes.title
            title = title_shape.text_frame.text if title_shape is not None and title_shape.has_text_frame else None
            layout.slide(number, title)
            for shape in slide.shapes:
                if title_shape is None or shape.shape_id != title_shape.shape_id:
                    _shape(layout, shape, 0)
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                notes = slide.notes_slide.notes_text_frame.text
                if notes.strip():
                    layout.block(f"Notes: {notes}")
        props = prs.core_properties
        title = (props.title or "").strip() or None
        meta: dict[str, Any] = {"format": "pptm" if what == ".pptm file" else "pptx", "slide_count": count}
        if (props.author or "").strip():
            meta["author"] = props.author.strip()[:500]
    except _BROKEN as exc:
        raise extraction_failed(f"The {what} could not be read (corrupt or truncated?): {str(exc)[:200]}") from None
    if macros:
        meta["macros"] = "not run: only the text was read"
    first = next((h for _, h in layout.outline().headings if not h.startswith("Slide ")), None)
    return layout.document("presentation", title or first, meta)


def _shape(layout: Layout, shape: Any, depth: int) -> None:
    if shape.shape_type == MSO_SHAPE_TYPE.GROUP and depth < MAX_GROUP_DEPTH:
        for inner in shape.shapes:
            _shape(layout, inner, depth + 1)
        return
    if getattr(shape, "has_table", False) and shape.has_table:
        layout.table([[cell.text for cell in row.cells] for row in shape.table.rows])
        return
    if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        paragraphs = [(p.level, p.text) for p in shape.text_frame.paragraphs if p.text.strip()]
        if len(paragraphs) == 1:
            layout.block(paragraphs[0][1])
            return
        for level, text in paragraphs:
            layout.item(text, level)


def _odp(data: bytes, max_chars: int) -> Document:
    root, title = odf_open(data, ".odp file")
    body = root.find("office:body/office:presentation", ODF_NS)
    if body is None:
        raise extraction_failed("The .odp file has no slides (is it another OpenDocument type?).")
    layout = Layout(max_chars)
    pres = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
    count = 0
    for number, page in enumerate(body.findall("draw:page", ODF_NS), start=1):
        count = number
        frames = page.findall("draw:frame", ODF_NS)
        heading = next((f for f in frames if f.get(pres + "class") == "title"), None)
        words = " ".join(odf_words(p) for p in heading.iter(TEXT + "p")) if heading is not None else ""
        layout.slide(number, one_line(words) or None)
        for frame in frames:
            if frame is heading:
                continue
            for table in frame.findall("table:table", ODF_NS):
                layout.table(odf_table(table))
            for box in frame.findall("draw:text-box", ODF_NS):
                odf_blocks(box, layout)
        notes = page.find("presentation:notes", ODF_NS)
        if notes is not None:
            said = " ".join(odf_words(p) for p in notes.iter(TEXT + "p"))
            if said.strip():
                layout.block(f"Notes: {said}")
        if layout.truncated:
            break
    first = next((h for _, h in layout.outline().headings if not h.startswith("Slide ")), None)
    return layout.document("presentation", title or first, {"format": "odp", "slide_count": count})
