"""Word-processor documents read into a `Layout`: .docx and .docm by python-docx (its XML parser resolves no entity;
a macro is never run, only the text read), .odt by lxml on the package's content.xml, .rtf by striprtf. Headings
(styles and outline levels) become the heading path, numbered and bulleted lists their items, tables rows that name
their columns. The ODF helpers here serve the presentations too."""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

from docx.opc.exceptions import PackageNotFoundError
from docx.opc.part import PartFactory
from docx.package import Package
from docx.parts.document import DocumentPart
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml import etree
from striprtf.striprtf import rtf_to_text

from lev.core.errors import extraction_failed
from lev.ingest.containers import is_compound, open_zip, parse_xml, read_member, refuse_compound
from lev.ingest.layout import Document, Layout, one_line

# python-docx reads a macro-enabled document's main part as it reads any other (its text; the macros stay bytes)
PartFactory.part_type_for["application/vnd.ms-word.document.macroEnabled.main+xml"] = DocumentPart

DOCX = ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.ms-word.document.macroenabled.12")
ODT = "application/vnd.oasis.opendocument.text"
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_RTF_TITLE = re.compile(rb"\\title\s+([^{}\\]{1,500})")
_BROKEN = (KeyError, ValueError, TypeError, AttributeError, IndexError, etree.XMLSyntaxError, zipfile.BadZipFile,
           PackageNotFoundError, EOFError, OSError)


def read(data: bytes, mime: str, name: str, max_chars: int) -> Document:
    if mime in DOCX:
        return _docx(data, mime, max_chars)
    if mime == ODT:
        return _odt(data, max_chars)
    return _rtf(data, max_chars)


# ----------------------------------------------------------------------------------------------------------- .docx

def _docx(data: bytes, mime: str, max_chars: int) -> Document:
    what = ".docm file" if mime.endswith("macroenabled.12") else ".docx file"
    if is_compound(data):
        raise refuse_compound(data, what)
    zf = open_zip(data, what, ["[Content_Types].xml"])
    macros = any(n.lower().endswith("vbaproject.bin") for n in zf.namelist())
    zf.close()
    try:
        part = Package.open(io.BytesIO(data)).main_document_part
    except _BROKEN as exc:
        raise extraction_failed(f"The {what} could not be read (corrupt or truncated?): {str(exc)[:200]}") from None
    if not isinstance(part, DocumentPart):
        raise extraction_failed(f"The {what} has no Word document in it (its main part is {part.content_type}).")
    layout = Layout(max_chars)
    try:
        doc = part.document
        lists = _Numbering(part)
        for block in doc.iter_inner_content():
            if layout.truncated:
                break
            if isinstance(block, Table):
                layout.table(_table_rows(block))
            elif isinstance(block, Paragraph):
                _paragraph(layout, block, lists)
        props = doc.core_properties
        title = (props.title or "").strip() or None
        meta: dict[str, Any] = {"format": "docm" if macros and what == ".docm file" else "docx"}
        if (props.author or "").strip():
            meta["author"] = props.author.strip()[:500]
    except _BROKEN as exc:
        raise extraction_failed(f"The {what} could not be read (corrupt?): {str(exc)[:200]}") from None
    if macros:
        meta["macros"] = "not run: only the text was read"
    return layout.document("document", title or layout.first_heading, meta)


def _style_level(style: Any) -> int | None:
    """The heading level of a paragraph style (`Heading 2` -> 2, `Title` -> 1), following its base styles."""
    seen = 0
    while style is not None and seen < 10:
        name = (style.name or "").strip()
        m = _HEADING_STYLE.match(name)
        if m:
            return int(m.group(1))
        if name.lower() == "title":
            return 1
        style, seen = style.base_style, seen + 1
    return None


def _outline_level(p: Paragraph) -> int | None:
    found = p._p.xpath("./w:pPr/w:outlineLvl/@w:val")
    try:
        level = int(found[0]) if found else None
    except ValueError:
        return None
    return level + 1 if level is not None and level < 9 else None


def _paragraph(layout: Layout, p: Paragraph, lists: _Numbering) -> None:
    text = p.text
    if not text.strip():
        return
    level = _style_level(p.style) or _outline_level(p)
    if level is not None:
        layout.heading(level, text)
        return
    item = lists.item(p)
    if item is not None:
        depth, marker = item
        layout.item(text, depth, marker)
    else:
        layout.block(text)


class _Numbering:
    """Which paragraphs are list items, their depth and their number (`3.`), from the document's numbering part."""

    def __init__(self, part: DocumentPart) -> None:
        self.formats: dict[tuple[str, int], str] = {}
        self.counts: dict[tuple[str, int], int] = {}
        try:
            numbering = part.numbering_part.element
        except (KeyError, NotImplementedError, AttributeError):
            return
        abstract = {a.get(f"{{{_W}}}abstractNumId"): a for a in numbering.findall(f"{{{_W}}}abstractNum")}
        for num in numbering.findall(f"{{{_W}}}num"):
            ref = num.find(f"{{{_W}}}abstractNumId")
            definition = abstract.get(ref.get(f"{{{_W}}}val")) if ref is not None else None
            if definition is None:
                continue
            for lvl in definition.findall(f"{{{_W}}}lvl"):
                fmt = lvl.find(f"{{{_W}}}numFmt")
                try:
                    key = (num.get(f"{{{_W}}}numId") or "", int(lvl.get(f"{{{_W}}}ilvl") or 0))
                except ValueError:
                    continue
                self.formats[key] = fmt.get(f"{{{_W}}}val") if fmt is not None else "bullet"

    def item(self, p: Paragraph) -> tuple[int, str | None] | None:
        num = p._p.xpath("./w:pPr/w:numPr")
        if not num and p.style is not None and p.style.element.pPr is not None:
            num = p.style.element.pPr.xpath("./w:numPr")
        if not num:
            return None
        ids = num[0].xpath("./w:numId/@w:val")
        levels = num[0].xpath("./w:ilvl/@w:val")
        num_id = ids[0] if ids else ""
        if num_id == "0":  # numbering switched off
            return None
        depth = int(levels[0]) if levels and levels[0].isdigit() else 0
        for key in [k for k in self.counts if k[0] == num_id and k[1] > depth]:
            del self.counts[key]  # a deeper list restarts under a new item
        n = self.counts[(num_id, depth)] = self.counts.get((num_id, depth), 0) + 1
        fmt = self.formats.get((num_id, depth), "bullet")
        return min(depth, 8), (None if fmt in ("bullet", "none") else f"{n}.")


def _table_rows(table: Table) -> list[list[str]]:
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        last = None
        for cell in row.cells:
            if cell._tc is last:  # a merged cell is listed once per column it spans
                continue
            last = cell._tc
            cells.append(cell.text)
        rows.append(cells)
    return rows


# ------------------------------------------------------------------------------------------------------------- ODF

ODF_NS = {"office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
          "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
          "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
          "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
          "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
          "dc": "http://purl.org/dc/elements/1.1/",
          "manifest": "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"}
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"


def odf_open(data: bytes, what: str) -> tuple[Any, str | None]:
    """The content.xml root of an ODF package and its title (meta.xml); 422 for a password-protected one."""
    zf = open_zip(data, what, ["content.xml"])
    if "META-INF/manifest.xml" in zf.namelist():
        manifest = parse_xml(read_member(zf, "META-INF/manifest.xml", what), f"{what}'s manifest")
        if manifest.find(".//manifest:encryption-data", ODF_NS) is not None:
            raise extraction_failed(f"The {what} is password-protected (its content is encrypted); remove the "
                                    "password and upload it again.")
    root = parse_xml(read_member(zf, "content.xml", what), f"{what}'s content")
    title = None
    if "meta.xml" in zf.namelist():
        meta = parse_xml(read_member(zf, "meta.xml", what), f"{what}'s metadata")
        title = one_line(meta.findtext(".//dc:title", default="", namespaces=ODF_NS)) or None
    return root, title


def odf_words(el: Any) -> str:
    """The text of an ODF paragraph or heading: spans followed, `text:s` spaces, tabs and line breaks kept."""
    parts: list[str] = [el.text or ""]
    for child in el:
        tag = child.tag if isinstance(child.tag, str) else ""
        if tag == TEXT + "s":
            parts.append(" ")
        elif tag == TEXT + "tab":
            parts.append("\t")
        elif tag == TEXT + "line-break":
            parts.append("\n")
        elif tag not in (TEXT + "note", TEXT + "tracked-changes"):
            parts.append(odf_words(child))
        parts.append(child.tail or "")
    return "".join(parts)


def odf_blocks(el: Any, layout: Layout, depth: int = -1) -> None:
    """An ODF body's headings, paragraphs, lists and tables in order (sections and frames followed)."""
    for child in el:
        tag = child.tag if isinstance(child.tag, str) else ""
        if tag == TEXT + "h":
            try:
                level = int(child.get(TEXT + "outline-level") or 1)
            except ValueError:
                level = 1
            layout.heading(min(max(level, 1), 9), odf_words(child))
        elif tag == TEXT + "p":
            if depth >= 0:
                layout.item(odf_words(child), depth)
            else:
                layout.block(odf_words(child))
        elif tag == TEXT + "list":
            for item in child:
                odf_blocks(item, layout, depth + 1)
        elif tag == TABLE + "table":
            layout.table(odf_table(child))
        elif tag not in (TEXT + "tracked-changes", TEXT + "sequence-decls"):
            odf_blocks(child, layout, depth)
        if layout.truncated:
            return


def odf_table(table: Any) -> list[list[str]]:
    """An ODF table's rows, each cell's paragraphs joined."""
    cell_tags = (TABLE + "table-cell", TABLE + "covered-table-cell")
    return [["\n".join(odf_words(p) for p in cell.iter(TEXT + "p")) for cell in row if cell.tag in cell_tags]
            for row in table.iter(TABLE + "table-row")]


def _odt(data: bytes, max_chars: int) -> Document:
    root, title = odf_open(data, ".odt file")
    body = root.find("office:body/office:text", ODF_NS)
    if body is None:
        raise extraction_failed("The .odt file has no text body (is it another OpenDocument type?).")
    layout = Layout(max_chars)
    odf_blocks(body, layout)
    return layout.document("document", title or layout.first_heading, {"format": "odt"})


# ------------------------------------------------------------------------------------------------------------ .rtf

def _rtf(data: bytes, max_chars: int) -> Document:
    if not data.lstrip().startswith(b"{\\rtf"):
        raise extraction_failed("The .rtf file does not start as RTF does ({\\rtf).")
    try:
        text = rtf_to_text(data.decode("latin-1"), errors="replace")
    except (ValueError, IndexError, LookupError) as exc:
        raise extraction_failed(f"The .rtf file could not be read: {exc}") from None
    layout = Layout(max_chars)
    for paragraph in text.replace("\r\n", "\n").split("\n"):
        layout.block(paragraph)
    found = _RTF_TITLE.search(data[:65536])
    title = one_line(found.group(1).decode("latin-1")) if found else None
    return layout.document("document", title or None, {"format": "rtf"})
