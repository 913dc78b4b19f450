"""Real documents of every format Lev reads, built the way their own software writes them (python-docx,
python-pptx, openpyxl; OpenDocument, EPUB and e-mail packages put together by hand as their specifications say),
and hostile ones (ZIP bombs, entity tricks, encrypted, truncated, macro-enabled, a ZIP of something else)."""

from __future__ import annotations

import io
import zipfile
from email.message import EmailMessage
from typing import Any

from docx import Document
from openpyxl import Workbook
from pptx import Presentation
from pptx.util import Inches

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
DOCM = "application/vnd.ms-word.document.macroenabled.12"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
XLSM = "application/vnd.ms-excel.sheet.macroenabled.12"
ODT = "application/vnd.oasis.opendocument.text"
ODP = "application/vnd.oasis.opendocument.presentation"
ODS = "application/vnd.oasis.opendocument.spreadsheet"
EPUB = "application/epub+zip"


def docx(title: str | None = "Q3 Plan", sections: int = 1, author: str = "Ada") -> bytes:
    """A report: headings (two levels), a bulleted and a numbered list, a table with a header row."""
    d = Document()
    if title:
        d.core_properties.title = title
    d.core_properties.author = author
    for n in range(1, sections + 1):
        d.add_heading(f"Goals {n}" if sections > 1 else "Goals", 1)
        d.add_paragraph("Grow the lighthouse network along the northern granite coast.")
        d.add_heading("Budget", 2)
        d.add_paragraph("Repaint the towers", style="List Bullet")
        d.add_paragraph("Replace the foghorns", style="List Bullet")
        d.add_paragraph("Survey the reefs", style="List Number")
        d.add_paragraph("Hire two keepers", style="List Number")
        table = d.add_table(rows=3, cols=2)
        for r, (a, b) in enumerate((("Item", "Cost"), ("Paint", "1200 crowns"), ("Foghorns", "400 crowns"))):
            table.cell(r, 0).text, table.cell(r, 1).text = a, b
    d.add_heading("Risks", 1)
    d.add_paragraph("Winter storms may delay the survey of the outer reefs.")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def long_docx(pages: int) -> bytes:
    """A report of about `pages` pages: a heading and five paragraphs of prose per page."""
    d = Document()
    d.core_properties.title = "A long report"
    for n in range(1, pages + 1):
        d.add_heading(f"Chapter {n}", 1 if n % 10 == 1 else 2)
        for m in range(5):
            d.add_paragraph(f"Page {n}, paragraph {m}: the harbour master recorded the tides, the winds and the "
                            "ships that came in, and the keepers wrote down every lamp they trimmed at dusk "
                            "so that the almanac would stay true for the next season of sailing.")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def pptx() -> bytes:
    """A deck: a titled slide with bullets and speaker notes, a slide with a table, an untitled slide."""
    prs = Presentation()
    s = prs.slides.add_slide(prs.slide_layouts[1])
    s.shapes.title.text = "Roadmap"
    body = s.placeholders[1].text_frame
    body.text = "Ship the tide tables app"
    sub = body.add_paragraph()
    sub.text, sub.level = "Beta for the harbour pilots", 1
    s.notes_slide.notes_text_frame.text = "Mention the budget freeze before the questions."
    s = prs.slides.add_slide(prs.slide_layouts[5])
    s.shapes.title.text = "Costs"
    table = s.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, (a, b) in enumerate((("Item", "Cost"), ("Servers", "300 crowns"), ("Lanterns", "90 crowns"))):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    s = prs.slides.add_slide(prs.slide_layouts[6])
    box = s.shapes.add_textbox(Inches(1), Inches(1), Inches(5), Inches(1))
    box.text_frame.text = "Questions about the mooring fees go to the quartermaster."
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


def xlsx(rows: int = 3, macros: bool = False) -> bytes:
    """A workbook: a Budget sheet with a header row and `rows` rows, and a People sheet."""
    wb = Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws.append(["Item", "Q1", "Q2"])
    for i in range(rows):
        ws.append([f"Lantern oil {i}" if i else "Rent for the boathouse", 1200 + i, 1300.5 + i])
    people = wb.create_sheet("People")
    people.append(["Name", "Role"])
    people.append(["Ada", "Harbour master"])
    people.append(["Bram", "Keeper of the north light"])
    out = io.BytesIO()
    wb.save(out)
    data = out.getvalue()
    return with_macros(data, "xl") if macros else data


def with_macros(data: bytes, folder: str) -> bytes:
    """An OOXML package made macro-enabled: a vbaProject.bin beside its main part and the content types that
    name it (the macro is bytes that would run if anything ran it: nothing does)."""
    main = {"xl": ("xl/workbook.xml", "application/vnd.ms-excel.sheet.macroEnabled.main+xml"),
            "word": ("word/document.xml", "application/vnd.ms-word.document.macroEnabled.main+xml")}[folder]
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == "[Content_Types].xml":
                text = body.decode()
                for old in ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml",
                            "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"):
                    text = text.replace(old, main[1])
                text = text.replace("</Types>", '<Default Extension="bin" ContentType="application/vnd.ms-office.'
                                    'vbaProject"/></Types>')
                body = text.encode()
            z.writestr(info, body)
        macro = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b'Sub AutoOpen(): Shell "rm -rf /"'
        z.writestr(f"{folder}/vbaProject.bin", macro)
    return out.getvalue()


def docm() -> bytes:
    return with_macros(docx("Macro memo"), "word")


def _odf(mime: str, body: str, title: str | None = None, manifest_extra: str = "") -> bytes:
    """An OpenDocument package: the mimetype first and stored, content.xml, meta.xml, the manifest."""
    ns = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
          'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
          'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
          'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
          'xmlns:dc="http://purl.org/dc/elements/1.1/"')
    content = f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ns} office:version="1.3">' \
              f"<office:body>{body}</office:body></office:document-content>"
    meta = f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta {ns}><office:meta>' \
           f'{f"<dc:title>{title}</dc:title>" if title else ""}</office:meta></office:document-meta>'
    manifest = ('<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:'
                f'opendocument:xmlns:manifest:1.0" manifest:version="1.3"><manifest:file-entry manifest:full-path="/" '
                f'manifest:media-type="{mime}"/><manifest:file-entry manifest:full-path="content.xml" '
                f'manifest:media-type="text/xml">{manifest_extra}</manifest:file-entry></manifest:manifest>')
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), mime)  # stored, first: how ODF files announce their type
        z.writestr("content.xml", content)
        z.writestr("meta.xml", meta)
        z.writestr("META-INF/manifest.xml", manifest)
    return out.getvalue()


def odt(encrypted: bool = False) -> bytes:
    body = ('<office:text><text:h text:outline-level="1">Harbour rules</text:h>'
            "<text:p>Ships moor on the<text:s/>east quay after dusk.</text:p>"
            '<text:h text:outline-level="2">Fees</text:h>'
            "<text:list><text:list-item><text:p>Mooring: two crowns a night</text:p></text:list-item>"
            "<text:list-item><text:p>Pilotage: five crowns</text:p></text:list-item></text:list>"
            "<table:table><table:table-row><table:table-cell><text:p>Boat</text:p></table:table-cell>"
            "<table:table-cell><text:p>Berth</text:p></table:table-cell></table:table-row>"
            "<table:table-row><table:table-cell><text:p>Gull</text:p></table:table-cell>"
            "<table:table-cell><text:p>B4</text:p></table:table-cell></table:table-row></table:table>"
            "</office:text>")
    extra = ('<manifest:encryption-data manifest:checksum-type="SHA1" manifest:checksum="x"><manifest:algorithm '
             'manifest:algorithm-name="Blowfish CFB" manifest:initialisation-vector="x"/></manifest:encryption-data>'
             if encrypted else "")
    return _odf(ODT, body, "Harbour rules", extra)


def odp() -> bytes:
    body = ('<office:presentation><draw:page draw:name="p1"><draw:frame presentation:class="title"><draw:text-box>'
            "<text:p>Tide tables</text:p></draw:text-box></draw:frame><draw:frame presentation:class=\"outline\">"
            "<draw:text-box><text:p>High water at the new moon</text:p></draw:text-box></draw:frame>"
            "<presentation:notes><draw:frame><draw:text-box><text:p>Say the spring tides are higher.</text:p>"
            "</draw:text-box></draw:frame></presentation:notes></draw:page>"
            '<draw:page draw:name="p2"><draw:frame><draw:text-box><text:p>Neap tides follow the quarter moons'
            "</text:p></draw:text-box></draw:frame></draw:page></office:presentation>")
    return _odf(ODP, body, "Tides")


def ods(repeated_rows: int = 1) -> bytes:
    body = ('<office:spreadsheet><table:table table:name="Catch">'
            "<table:table-row><table:table-cell><text:p>Fish</text:p></table:table-cell>"
            "<table:table-cell><text:p>Kilos</text:p></table:table-cell></table:table-row>"
            "<table:table-row><table:table-cell><text:p>Herring</text:p></table:table-cell>"
            '<table:table-cell office:value="42"><text:p>42</text:p></table:table-cell></table:table-row>'
            f'<table:table-row table:number-rows-repeated="{repeated_rows}"><table:table-cell '
            'table:number-columns-repeated="16384"/></table:table-row>'
            "<table:table-row><table:table-cell><text:p>Mackerel</text:p></table:table-cell>"
            '<table:table-cell office:value="17"><text:p>17</text:p></table:table-cell></table:table-row>'
            "</table:table></office:spreadsheet>")
    return _odf(ODS, body)


def epub(drm: bool = False, entity: bool = False) -> bytes:
    """An EPUB 3 book of three chapters (its spine in another order than its files' names), a navigation
    document with the chapter titles and an NCX."""
    chapters = {"c2.xhtml": ("The Storm", "<h2>Night</h2><p>The storm broke over the cape at midnight.</p>"),
                "c1.xhtml": ("The Keeper", "<h1>The Keeper</h1><p>Old Ansel trimmed the lamp every dusk.</p>"),
                "c3.xhtml": ("Morning", "<p>By morning the wreck of the Gull lay on the shingle.</p>")}
    order = ["c1.xhtml", "c2.xhtml", "c3.xhtml"]
    doctype = '<!DOCTYPE html [<!ENTITY boom "boomboomboom">]>' if entity else "<!DOCTYPE html>"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:'
                   'tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/book.opf" media-type='
                   '"application/oebps-package+xml"/></rootfiles></container>')
        items = "".join(f'<item id="{n[:2]}" href="text/{n}" media-type="application/xhtml+xml"/>' for n in order)
        z.writestr("OEBPS/book.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"'
                   ' unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>The Light'
                   'house Keeper</dc:title><dc:creator>M. Fenwick</dc:creator><dc:language>en</dc:language>'
                   '<dc:identifier id="id">urn:uuid:1</dc:identifier></metadata><manifest><item id="nav" href="nav.'
                   'xhtml" media-type="application/xhtml+xml" properties="nav"/><item id="ncx" href="toc.ncx" media-'
                   f'type="application/x-dtbncx+xml"/>{items}</manifest><spine toc="ncx">'
                   + "".join(f'<itemref idref="{n[:2]}"/>' for n in order) + "</spine></package>")
        links = "".join(f'<li><a href="text/{n}">{chapters[n][0]}</a></li>' for n in order)
        z.writestr("OEBPS/nav.xhtml", '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub='
                   '"http://www.idpf.org/2007/ops"><body><nav epub:type="toc"><ol>' + links + "</ol></nav></body>"
                   "</html>")
        z.writestr("OEBPS/toc.ncx", '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap>'
                   + "".join(f'<navPoint><navLabel><text>{chapters[n][0]}</text></navLabel><content src="text/{n}"/>'
                             "</navPoint>" for n in order) + "</navMap></ncx>")
        for name, (_title, html) in chapters.items():
            z.writestr(f"OEBPS/text/{name}", f'<?xml version="1.0" encoding="utf-8"?>{doctype}<html xmlns="http://'
                       f'www.w3.org/1999/xhtml"><head><title>x</title></head><body>{html}'
                       f'{"<p>&boom;</p>" if entity else ""}</body></html>')
        if drm:
            z.writestr("META-INF/encryption.xml", '<?xml version="1.0"?><encryption xmlns="urn:oasis:names:tc:'
                       'opendocument:xmlns:container" xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:Encrypted'
                       'Data><enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/><enc:'
                       'CipherData><enc:CipherReference URI="OEBPS/text/c1.xhtml"/></enc:CipherData></enc:Encrypted'
                       "Data></encryption>")
    return out.getvalue()


def eml(attachments: list[tuple[str, str, bytes]] | None = None, html: bool = False) -> bytes:
    msg = EmailMessage()
    msg["From"] = "Ada Lovelace <ada@example.org>"
    msg["To"] = "Harbour office <office@example.org>"
    msg["Subject"] = "Q3 plan for the lighthouses"
    msg["Date"] = "Mon, 06 May 2024 10:00:00 +0000"
    text = "Hello all,\n\nthe beacon repairs start on the first of June.\n\nAda"
    if html:
        msg.set_content(text)
        msg.add_alternative("<html><body><h1>Plan</h1><p>The beacon repairs start on the first of June.</p>"
                            "</body></html>", subtype="html")
    else:
        msg.set_content(text)
    for filename, mime, data in attachments or []:
        main, sub = mime.split("/", 1)
        msg.add_attachment(data, maintype=main, subtype=sub, filename=filename)
    return bytes(msg)


MARKDOWN = b"""---
title: Harbour notes
tags: [harbour, "#tides", projects/lighthouse]
date: 2024-05-01
aliases: [Port notes]
source: interview
---
# Moorings

Boats moor at the [[East Quay|east quay]] and pay at [[Harbour Office]].

## Fees

- Mooring: two crowns
- Pilotage: five crowns
  - at night: seven crowns

| Boat | Berth |
|------|-------|
| Gull | B4    |

```
tide = high + 2
```
"""

HTML = b"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>Tide tables of the cape</title>
<meta name="description" content="When the water is high"><link rel="canonical" href="https://tides.example.org/cape">
</head><body><nav><a href="/">Home</a> <a href="/about">About</a></nav><main><h1>Tide tables</h1>
<p>High water comes twice a day at the cape.</p><h2>Spring tides</h2><ul><li>New moon</li><li>Full moon</li></ul>
<table><tr><th>Day</th><th>High water</th></tr><tr><td>Monday</td><td>06:12</td></tr></table></main>
<footer>Copyright the cape</footer></body></html>"""

RTF = rb"""{\rtf1\ansi\deff0{\fonttbl{\f0 Times;}}{\info{\title Keeper's log}{\author Ansel}}
\f0 The lamp was lit at dusk.\par
The fog came in at nine and the horn sounded until dawn.\par}"""

CSV = b"Ship,Tonnage,Captain\nGull,120,Ada\nTern,80,Bram\n"


def zip_bomb_docx(unpacked: int = 64 * 1024 * 1024) -> bytes:
    """A .docx whose document.xml unpacks to `unpacked` bytes of one repeated character (about 1000:1)."""
    good = zipfile.ZipFile(io.BytesIO(docx()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for info in good.infolist():
            if info.filename != "word/document.xml":
                z.writestr(info.filename, good.read(info))
        with z.open("word/document.xml", "w", force_zip64=True) as member:
            block = b" " * (1 << 20)
            for _ in range(unpacked // len(block)):
                member.write(block)
    return out.getvalue()


def declared_bomb(members: int = 6, declared: int = 200 << 20, packed: int = 2 << 20) -> bytes:
    """A .docx whose central directory declares `members` parts of `declared` bytes each, packed to `packed`
    (within the ratio cap, past the total one): what an archive of overlapping or lying entries looks like."""
    good = zipfile.ZipFile(io.BytesIO(docx()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in good.infolist():
            z.writestr(info.filename, good.read(info))
        for i in range(members):
            z.writestr(f"word/media/part{i}.xml", "<x/>")
    data = bytearray(out.getvalue())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        name_len = int.from_bytes(data[at + 28:at + 30], "little")
        name = bytes(data[at + 46:at + 46 + name_len])
        if name.startswith(b"word/media/part"):
            data[at + 20:at + 24] = packed.to_bytes(4, "little")
            data[at + 24:at + 28] = declared.to_bytes(4, "little")
        at = data.find(b"PK\x01\x02", at + 46)
    return bytes(data)


def entity_docx(external: bool = False) -> bytes:
    """A .docx whose document.xml declares entities: a billion laughs, or an external one (a file, a URL)."""
    good = zipfile.ZipFile(io.BytesIO(docx()))
    if external:
        dtd = '<!DOCTYPE w:document [<!ENTITY x SYSTEM "file:///etc/passwd"><!ENTITY y SYSTEM "http://127.0.0.1:9/">]>'
        use = "&x;&y;"
    else:
        dtd = ('<!DOCTYPE w:document [<!ENTITY a "lollollollollollollollollollol">'
               + "".join(f'<!ENTITY {chr(98 + i)} "' + f"&{chr(97 + i)};" * 10 + '">' for i in range(9)) + "]>")
        use = "&j;"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in good.infolist():
            body = good.read(info)
            if info.filename == "word/document.xml":
                text = body.decode()
                head, _, rest = text.partition("?>")
                rest = rest.replace("Winter storms", f"Winter {use} storms", 1)
                body = (head + "?>" + dtd + rest).encode()
            z.writestr(info.filename, body)
    return out.getvalue()


def zip_of_something_else() -> bytes:
    """A ZIP archive of holiday photos' names and a text file, sent as a .docx."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("notes.txt", "not a Word document")
        z.writestr("photos/beach.jpg", b"\xff\xd8\xff" + b"\x00" * 100)
    return out.getvalue()


def encrypted(data: bytes, password: str = "open-sesame") -> bytes:
    """An OOXML file encrypted with a password the way Office does it (an OLE2 EncryptedPackage: msoffcrypto)."""
    import msoffcrypto
    from msoffcrypto.format.ooxml import OOXMLFile

    out = io.BytesIO()
    OOXMLFile(io.BytesIO(data)).encrypt(password, out)  # type: ignore[no-untyped-call]
    assert msoffcrypto.olefile.isOleFile(io.BytesIO(out.getvalue()))
    return out.getvalue()


def many_members(count: int = 10_001) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        for i in range(count):
            z.writestr(f"word/m{i}.xml", "")
    return out.getvalue()


def legacy_doc() -> bytes:
    """An old binary Word file: a compound file (OLE2) with a WordDocument stream, no encryption (a minimal one,
    written by hand as the compound file format lays it out: header, one FAT sector, one directory sector)."""
    sector = 512
    header = bytearray(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 16 + b"\x3e\x00\x03\x00\xfe\xff\x09\x00"
                       + b"\x06\x00" + b"\x00" * 10 + b"\x01\x00\x00\x00" + b"\x01\x00\x00\x00" + b"\x00" * 4
                       + b"\x00\x10\x00\x00" + b"\xfe\xff\xff\xff" + b"\x00\x00\x00\x00" + b"\xfe\xff\xff\xff"
                       + b"\x00\x00\x00\x00")
    header += b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" * 108
    fat = (b"\xfd\xff\xff\xff" + b"\xfe\xff\xff\xff" + b"\xff\xff\xff\xff" * 126)
    def entry(name: str, kind: int, start: int, size: int, child: int = -1) -> bytes:
        raw = name.encode("utf-16-le") + b"\x00\x00"
        return (raw.ljust(64, b"\x00") + len(raw).to_bytes(2, "little") + bytes([kind, 1])
                + (-1 & 0xFFFFFFFF).to_bytes(4, "little") * 2 + (child & 0xFFFFFFFF).to_bytes(4, "little")
                + b"\x00" * 36 + (start & 0xFFFFFFFF).to_bytes(4, "little") + size.to_bytes(4, "little") + b"\x00" * 4)
    directory = entry("Root Entry", 5, -2, 0, child=1) + entry("WordDocument", 2, -2, 0) + b"\x00" * 256
    return bytes(header[:sector]) + fat + directory


def sample(kind: str) -> tuple[str, str, bytes]:
    """(file name, MIME type, bytes) of a sample document of each format."""
    table: dict[str, Any] = {
        "docx": ("plan.docx", DOCX, docx), "pptx": ("deck.pptx", PPTX, pptx), "xlsx": ("budget.xlsx", XLSX, xlsx),
        "odt": ("rules.odt", ODT, odt), "odp": ("tides.odp", ODP, odp), "ods": ("catch.ods", ODS, ods),
        "epub": ("keeper.epub", EPUB, epub), "eml": ("plan.eml", "message/rfc822", eml),
        "md": ("harbour.md", "text/markdown", lambda: MARKDOWN), "html": ("tides.html", "text/html", lambda: HTML),
        "rtf": ("log.rtf", "application/rtf", lambda: RTF), "csv": ("ships.csv", "text/csv", lambda: CSV),
        "txt": ("readme.txt", "text/plain", lambda: b"Plain words about the ferry timetable.\nSecond line.\n"),
        "json": ("config.json", "application/json", lambda: b'{"ferry": "departs at noon", "pier": 3}\n'),
    }
    name, mime, make = table[kind]
    return name, mime, make()
