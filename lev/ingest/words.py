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
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
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
        styles = _Styles(part)
        lists = _Numbering(part, styles)
        _body(layout, part.element.find(W + "body"), styles, lists)
        props = part.core_properties
        title = (props.title or "").strip() or None
        meta: dict[str, Any] = {"format": "docm" if macros and what == ".docm file" else "docx"}
        if (props.author or "").strip():
            meta["author"] = props.author.strip()[:500]
    except _BROKEN as exc:
        raise extraction_failed(f"The {what} could not be read (corrupt?): {str(exc)[:200]}") from None
    if macros:
        meta["macros"] = "not run: only the text was read"
    return layout.document("document", title or layout.first_heading, meta)


def _body(layout: Layout, body: Any, styles: _Styles, lists: _Numbering) -> None:
    """The body's paragraphs and tables in order (content controls followed), read from the XML itself: python-docx's
    proxies look every paragraph's style up anew (a 300-page report took minutes)."""
    if body is None:
        return
    for el in body:
        if layout.truncated:
            return
        if el.tag == W + "p":
            _paragraph(layout, el, styles, lists)
        elif el.tag == W + "tbl":
            layout.table([[_cell_text(tc) for tc in tr.iter(W + "tc")] for tr in el.iter(W + "tr")])
        elif el.tag == W + "sdt":
            _body(layout, el.find(W + "sdtContent"), styles, lists)


def _words(p: Any) -> str:
    """A paragraph's text: its runs' text (hyperlinks, insertions, text boxes followed; deletions and field codes
    not), tabs and breaks kept."""
    parts = []
    for node in p.iter(W + "t", W + "tab", W + "br", W + "cr"):
        parts.append(node.text or "" if node.tag == W + "t" else "\t" if node.tag == W + "tab" else "\n")
    return "".join(parts)


def _cell_text(tc: Any) -> str:
    return "\n".join(_words(p) for p in tc.iter(W + "p"))


def _val(el: Any, path: str) -> str | None:
    found = el.find(path) if el is not None else None
    return found.get(W + "val") if found is not None else None


class _Styles:
    """Each paragraph style's heading level (`Heading 2` -> 2, `Title` -> 1, an outline level) and numbering,
    following its base styles: read once per document."""

    def __init__(self, part: DocumentPart) -> None:
        self.level: dict[str, int | None] = {}
        self.numbering: dict[str, Any] = {}
        found: dict[str, Any] = {}
        try:
            root = part.styles.element
        except (KeyError, NotImplementedError, AttributeError):
            return
        for style in root.iter(W + "style"):
            if style.get(W + "type") in (None, "paragraph") and style.get(W + "styleId"):
                found[style.get(W + "styleId")] = style
        for sid in found:
            self.level[sid], self.numbering[sid] = self._resolve(found, sid)

    @staticmethod
    def _resolve(found: dict[str, Any], sid: str) -> tuple[int | None, Any]:
        level, numbering, seen = None, None, 0
        style = found.get(sid)
        while style is not None and seen < 10 and (level is None or numbering is None):
            name = (_val(style, W + "name") or "").strip()
            m = _HEADING_STYLE.match(name)
            if level is None and m:
                level = int(m.group(1))
            elif level is None and name.lower() == "title":
                level = 1
            elif level is None and (outline := _val(style, f"{W}pPr/{W}outlineLvl")) and outline.isdigit() \
                    and int(outline) < 9:
                level = int(outline) + 1
            if numbering is None:
                numbering = style.find(f"{W}pPr/{W}numPr")
            style, seen = found.get(_val(style, W + "basedOn") or ""), seen + 1
        return level, numbering


def _paragraph(layout: Layout, p: Any, styles: _Styles, lists: _Numbering) -> None:
    text = _words(p)
    if not text.strip():
        return
    ppr = p.find(W + "pPr")
    sid = _val(ppr, W + "pStyle") or ""
    outline = _val(ppr, W + "outlineLvl")
    level = styles.level.get(sid) or (int(outline) + 1 if outline and outline.isdigit() and int(outline) < 9
                                      else None)
    if level is not None:
        layout.heading(level, text)
        return
    num = ppr.find(W + "numPr") if ppr is not None else None
    item = lists.item(num if num is not None else styles.numbering.get(sid))
    if item is not None:
        depth, marker = item
        layout.item(text, depth, marker)
    else:
        layout.block(text)


class _Numbering:
    """Which paragraphs are list items, their depth and their number (`3.`), from the document's numbering part."""

    def __init__(self, part: DocumentPart, styles: _Styles) -> None:
        self.formats: dict[tuple[str, int], str] = {}
        self.counts: dict[tuple[str, int], int] = {}
        try:
            numbering = part.numbering_part.element
        except (KeyError, NotImplementedError, AttributeError):
            return
        abstract = {a.get(W + "abstractNumId"): a for a in numbering.findall(W + "abstractNum")}
        for num in numbering.findall(W + "num"):
            definition = abstract.get(_val(num, W + "abstractNumId"))
            if definition is None:
                continue
            for lvl in definition.findall(W + "lvl"):
                ilvl = lvl.get(W + "ilvl") or "0"
                if ilvl.isdigit():
                    self.formats[(num.get(W + "numId") or "", int(ilvl))] = _val(lvl, W + "numFmt") or "bullet"

    def item(self, num: Any) -> tuple[int, str | None] | None:
        if num is None:
            return None
        num_id = _val(num, W + "numId") or ""
        if num_id == "0":  # numbering switched off
            return None
        ilvl = _val(num, W + "ilvl") or "0"
        depth = int(ilvl) if ilvl.isdigit() else 0
        for key in [k for k in self.counts if k[0] == num_id and k[1] > depth]:
            del self.counts[key]  # a deeper list restarts under a new item
        n = self.counts[(num_id, depth)] = self.counts.get((num_id, depth), 0) + 1
        fmt = self.formats.get((num_id, depth), "bullet")
        return min(depth, 8), (None if fmt in ("bullet", "none") else f"{n}.")


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
