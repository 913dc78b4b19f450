"""E-books (EPUB 2 and 3) read into a `Layout`: the package's chapters in reading order (its spine), each under its
title from the table of contents (the EPUB 3 navigation document, else the NCX) as the heading path's first part.
Read with zipfile and lxml: the package files by the hardened XML parser, chapters by the HTML walker of
`lev.ingest.markup`. A book whose chapters are encrypted (DRM) is refused in words; fonts obfuscated by the
publisher are no obstacle."""

from __future__ import annotations

import posixpath
import zipfile
from typing import Any
from urllib.parse import unquote

from lev.core.errors import ApiError, extraction_failed
from lev.ingest.containers import open_zip, parse_xml, read_member
from lev.ingest.layout import Document, Layout, one_line
from lev.ingest.markup import parse_html, walk_html

NS = {"c": "urn:oasis:names:tc:opendocument:xmlns:container", "opf": "http://www.idpf.org/2007/opf",
      "dc": "http://purl.org/dc/elements/1.1/", "ncx": "http://www.daisy.org/z3986/2005/ncx/",
      "x": "http://www.w3.org/1999/xhtml", "epub": "http://www.idpf.org/2007/ops",
      "enc": "http://www.w3.org/2001/04/xmlenc#"}
_FONT_OBFUSCATION = ("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC")
_CHAPTER_TYPES = ("application/xhtml+xml", "text/html")
WHAT = ".epub file"


def read(data: bytes, mime: str, name: str, max_chars: int) -> Document:
    zf = open_zip(data, WHAT, ["META-INF/container.xml"])
    _refuse_drm(zf)
    container = parse_xml(read_member(zf, "META-INF/container.xml", WHAT), "e-book's container.xml")
    opf_path = container.xpath("string(//c:rootfile/@full-path)", namespaces=NS)
    if not opf_path:
        raise extraction_failed("The .epub file's container.xml names no package document.")
    opf = parse_xml(read_member(zf, opf_path, WHAT), "e-book's package document")
    base = posixpath.dirname(opf_path)
    manifest = {item.get("id"): item for item in opf.iterfind(".//opf:manifest/opf:item", NS)}
    titles = _toc_titles(zf, opf, manifest, base)
    layout = Layout(max_chars)
    chapters = 0
    for ref in opf.iterfind(".//opf:spine/opf:itemref", NS):
        item = manifest.get(ref.get("idref"))
        if item is None or item.get("media-type") not in _CHAPTER_TYPES:
            continue
        path = _join(base, item.get("href") or "")
        try:
            body = zf.read(path)
        except KeyError:
            continue  # the spine names a file the book does not have
        except (zipfile.BadZipFile, EOFError, OSError) as exc:
            raise extraction_failed(f"The .epub file is corrupt or truncated ({path[:200]}: {exc}).") from None
        chapters += 1
        _chapter(layout, body, titles.get(path))
        if layout.truncated:
            break
    meta: dict[str, Any] = {"format": "epub", "chapters": chapters}
    for key, tag in (("author", "creator"), ("language", "language"), ("publisher", "publisher")):
        value = one_line(opf.xpath(f"string(.//opf:metadata/dc:{tag})", namespaces=NS))
        if value:
            meta[key] = value[:500]
    title = one_line(opf.xpath("string(.//opf:metadata/dc:title)", namespaces=NS)) or None
    return layout.document("ebook", title, meta)


def _chapter(layout: Layout, body: bytes, title: str | None) -> None:
    try:
        root = parse_html(body)
    except ApiError:  # an empty or unreadable chapter is left out, the book still read
        return
    content = root.find("body")
    content = content if content is not None else root
    if title:
        layout.heading(1, title)
        walk_html(content, layout, shift=1, skip_heading=one_line(title))
    else:
        walk_html(content, layout)


def _join(base: str, href: str) -> str:
    return posixpath.normpath(posixpath.join(base, unquote(href.split("#", 1)[0]))).lstrip("/")


def _refuse_drm(zf: zipfile.ZipFile) -> None:
    if "META-INF/encryption.xml" not in zf.namelist():
        return
    enc = parse_xml(read_member(zf, "META-INF/encryption.xml", WHAT), "e-book's encryption.xml")
    for data in enc.iterfind(".//enc:EncryptedData", NS):
        method = data.xpath("string(enc:EncryptionMethod/@Algorithm)", namespaces=NS)
        target = data.xpath("string(.//enc:CipherReference/@URI)", namespaces=NS).lower()
        if method not in _FONT_OBFUSCATION and target.endswith((".xhtml", ".html", ".htm", ".xml")):
            raise extraction_failed("The .epub file is protected by DRM (its chapters are encrypted); Lev cannot "
                                    "read it.")


def _toc_titles(zf: zipfile.ZipFile, opf: Any, manifest: dict[str, Any], base: str) -> dict[str, str]:
    """Each chapter file's title in the table of contents (its first entry): the EPUB 3 navigation document's
    toc, else the NCX the spine names."""
    titles: dict[str, str] = {}
    nav = next((i for i in manifest.values() if "nav" in (i.get("properties") or "").split()), None)
    if nav is not None:
        path = _join(base, nav.get("href") or "")
        try:
            doc = parse_html(zf.read(path))
        except (ApiError, KeyError, zipfile.BadZipFile, EOFError, OSError):  # unreadable: the NCX, or no titles
            doc = None
        if doc is not None:
            tocs = [n for n in doc.iter("nav") if "toc" in (n.get("epub:type") or n.get("type") or "toc")]
            for a in (tocs[0] if tocs else doc).iter("a"):
                target = _join(posixpath.dirname(path), a.get("href") or "")
                label = one_line(a.text_content())
                if label and target not in titles:
                    titles[target] = label
    if titles:
        return titles
    spine = opf.find(".//opf:spine", NS)
    ncx = manifest.get(spine.get("toc")) if spine is not None else None
    if ncx is None:
        return titles
    path = _join(base, ncx.get("href") or "")
    try:
        root = parse_xml(zf.read(path), "e-book's NCX")
    except (ApiError, KeyError, zipfile.BadZipFile, EOFError, OSError):  # unreadable: chapters without titles
        return titles
    for point in root.iterfind(".//ncx:navPoint", NS):
        label = one_line(point.xpath("string(ncx:navLabel/ncx:text)", namespaces=NS))
        target = _join(posixpath.dirname(path), point.xpath("string(ncx:content/@src)", namespaces=NS))
        if label and target not in titles:
            titles[target] = label
    return titles
