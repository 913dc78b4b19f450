"""The document formats Lev reads itself, on real files (python-docx, python-pptx, openpyxl; ODF, EPUB and e-mail
packages put together as their specifications say): kinds, text, titles, metadata, outlines, and the locations
cut from them; the hostile files each refused in words."""

from __future__ import annotations

import asyncio
import io
import time
import zipfile
from collections.abc import Callable

import pytest

from lev.core.errors import ApiError
from lev.ingest import formats
from lev.ingest.chunking import passages
from lev.plumbing import offload
from lev.store.locations import Outline, normalize_text
from tests import fixtures_documents as fd


def read(kind: str) -> formats.Document:
    name, mime, data = fd.sample(kind)
    found = formats.resolve(name, mime)
    assert found is not None
    doc = formats.extract(found[1], data, name)
    assert normalize_text(doc.text) == doc.text  # stored as it is: every offset of the outline holds
    assert doc.outline.structured
    return doc


def heading_at(doc: formats.Document, needle: str) -> str | None:
    """The heading path of the passage that holds `needle` (the outline read as search reads it)."""
    at = doc.text.index(needle)
    found = [h for o, h in doc.outline.headings if o <= at]
    return found[-1] if found else None


@pytest.mark.parametrize(("name", "mime", "kind"), [
    ("a.docx", None, "document"), ("a.DOCX", "application/octet-stream", "document"), ("a.odt", None, "document"),
    ("a.rtf", "text/rtf", "document"), ("a.docm", None, "document"), ("a.pptx", None, "presentation"),
    ("a.odp", None, "presentation"), ("a.pptm", None, "presentation"), ("a.xlsx", None, "spreadsheet"),
    ("a.ods", None, "spreadsheet"), ("a.csv", None, "spreadsheet"), ("a.csv", "text/plain", "spreadsheet"),
    ("a.csv", "application/vnd.ms-excel", "spreadsheet"), ("a.tsv", None, "spreadsheet"), ("a.epub", None, "ebook"),
    ("a.md", None, "markdown"), ("a.markdown", "text/plain", "markdown"), ("x", "text/markdown", "markdown"),
    ("a.html", None, "html"), ("a.htm", None, "html"), ("a.eml", None, "email"), ("x", "message/rfc822", "email"),
    ("a.txt", None, "text"), ("a.log", "text/plain", "text"), ("a.json", None, "text"), ("a.yaml", None, "text"),
    ("notes", "text/plain", "text"), ("a.pdf", None, "pdf"), ("a.PNG", None, "image"), ("a.mp3", None, "audio"),
    ("a.exe", None, None), ("a.zip", None, None), ("a.xls", "application/vnd.ms-excel", None),
    ("a.docx", "application/x-msdownload", None), ("a", None, None),
])
def test_kind_for_names_and_types(name: str, mime: str | None, kind: str | None) -> None:
    assert formats.kind_for(name, mime) == kind


def test_kind_for_checks_the_leading_bytes() -> None:
    assert formats.kind_for("a.docx", None, fd.docx()[:1024]) == "document"
    assert formats.kind_for("a.docx", None, b"%PDF-1.7 not a docx") is None
    assert formats.kind_for("a.md", None, b"# Title\n") == "markdown"
    assert formats.kind_for("a.md", None, fd.docx()[:1024]) is None  # a ZIP is no text
    assert formats.kind_for("a.csv", None, b"a,b\x00\x01") is None
    assert formats.kind_for("a.rtf", None, b"{\\rtf1 x}") == "document"
    assert formats.kind_for("a.rtf", None, b"plain") is None


def test_mime_for_gives_the_type_to_upload_as() -> None:
    assert formats.mime_for("Report.DOCX") == fd.DOCX
    assert formats.mime_for("vault/note.md") == "text/markdown"
    assert formats.mime_for("mail.eml") == "message/rfc822"
    assert formats.mime_for("scan.pdf") == "application/pdf"
    assert formats.mime_for("x.exe") is None


def test_docx_headings_lists_tables_and_title() -> None:
    doc = read("docx")
    assert doc.kind == "document" and doc.title == "Q3 Plan"
    assert doc.metadata == {"format": "docx", "author": "Ada"}
    assert "Grow the lighthouse network along the northern granite coast." in doc.text
    assert "- Repaint the towers\n- Replace the foghorns\n1. Survey the reefs\n2. Hire two keepers" in doc.text
    assert "Item: Paint; Cost: 1200 crowns\nItem: Foghorns; Cost: 400 crowns" in doc.text
    assert heading_at(doc, "Repaint") == "Goals > Budget"
    assert heading_at(doc, "Winter storms") == "Risks"
    assert heading_at(doc, "Grow the lighthouse") == "Goals"


def test_docx_without_a_title_property_takes_its_first_heading_then_its_file_name() -> None:
    doc = formats.extract(fd.DOCX, fd.docx(title=None), "report.docx")
    assert doc.title == "Goals"
    empty = io.BytesIO()
    from docx import Document

    d = Document()
    d.add_paragraph("Only a paragraph.")
    d.save(empty)
    assert formats.extract(fd.DOCX, empty.getvalue(), "minutes 2024.docx").title == "minutes 2024"


def test_pptx_slides_titles_notes_and_tables() -> None:
    doc = read("pptx")
    assert doc.kind == "presentation" and doc.title == "Roadmap"
    assert doc.metadata["slide_count"] == 3
    assert "- Ship the tide tables app\n◦ Beta for the harbour pilots" in doc.text
    assert "Notes: Mention the budget freeze before the questions." in doc.text
    assert "Item: Servers; Cost: 300 crowns" in doc.text
    slides = dict((n, o) for o, n in doc.outline.slides)
    assert sorted(slides) == [1, 2, 3]
    assert doc.text[slides[2]:].startswith("Costs")
    assert heading_at(doc, "Mention the budget") == "Roadmap"
    assert heading_at(doc, "mooring fees") == "Slide 3"  # an untitled slide is named by its number


def test_xlsx_rows_name_their_columns_and_know_their_sheet_and_row() -> None:
    doc = read("xlsx")
    assert doc.kind == "spreadsheet" and doc.title == "budget"  # no title property: the file name
    assert doc.metadata["sheet_count"] == 2 and doc.metadata["rows"] == 5
    assert "Item: Rent for the boathouse; Q1: 1200; Q2: 1300.5" in doc.text
    assert "Name: Bram; Role: Keeper of the north light" in doc.text
    assert [name for _, name in doc.outline.sheets] == ["Budget", "People"]
    at = doc.text.index("Item: Lantern oil 2")
    assert (at, 4) in doc.outline.rows  # the sheet's own row number: the header is row 1
    cut = passages(doc.text, doc.title, None, (), doc.outline)
    assert all(cut.text[loc.char_start:loc.char_end] == body for body, loc in zip(cut.bodies, cut.locations,
                                                                                   strict=True))
    first = cut.locations[0]
    assert (first.sheet, first.row_start) == ("Budget", 2)
    assert first.row_end is not None and first.row_end >= 2


def test_a_big_sheet_cut_into_passages_gives_each_its_rows() -> None:
    doc = formats.extract(fd.XLSX, fd.xlsx(rows=400), "big.xlsx")
    cut = passages(doc.text, doc.title, None, (), doc.outline)
    budget = [loc for loc in cut.locations if loc.sheet == "Budget"]
    assert len(budget) > 3
    for body, loc in zip(cut.bodies, cut.locations, strict=True):
        if loc.sheet != "Budget":
            continue
        numbers = [2 if "Rent for the boathouse" in line else int(line.split("Lantern oil ")[1].split(";")[0]) + 2
                   for line in body.splitlines() if line.startswith("Item: ")]  # the Budget sheet's rows in it
        assert (loc.row_start, loc.row_end) == (min(numbers), max(numbers)) and loc.heading == "Budget"
    last = cut.locations[-1]  # a passage never spans two sheets
    assert (last.sheet, last.row_start, last.row_end) == ("People", 2, 3)
    assert cut.bodies[-1].startswith("People\nName: Ada")


def test_odt_odp_ods() -> None:
    odt = read("odt")
    assert (odt.kind, odt.title) == ("document", "Harbour rules")
    assert "Ships moor on the east quay after dusk." in odt.text
    assert "- Mooring: two crowns a night" in odt.text and "Boat: Gull; Berth: B4" in odt.text
    assert heading_at(odt, "Pilotage") == "Harbour rules > Fees"
    odp = read("odp")
    assert (odp.kind, odp.title) == ("presentation", "Tides")
    assert "Notes: Say the spring tides are higher." in odp.text
    assert [n for _, n in odp.outline.slides] == [1, 2]
    assert heading_at(odp, "Neap tides") == "Slide 2"
    ods = read("ods")
    assert ods.kind == "spreadsheet" and "Fish: Herring; Kilos: 42" in ods.text
    rows = dict(ods.outline.rows)
    assert rows[ods.text.index("Fish: Mackerel")] == 4  # after one empty repeated row


def test_ods_with_a_million_repeated_empty_rows_is_read_at_once() -> None:
    start = time.perf_counter()
    doc = formats.extract(fd.ODS, fd.ods(repeated_rows=1_048_000), "catch.ods")
    assert time.perf_counter() - start < 5
    assert dict(doc.outline.rows)[doc.text.index("Fish: Mackerel")] == 1_048_003


def test_epub_chapters_in_reading_order_under_their_titles() -> None:
    doc = read("epub")
    assert doc.kind == "ebook" and doc.title == "The Lighthouse Keeper"
    assert doc.metadata == {"format": "epub", "chapters": 3, "author": "M. Fenwick", "language": "en"}
    keeper, storm, wreck = (doc.text.index(s) for s in ("Old Ansel", "storm broke", "wreck of the Gull"))
    assert keeper < storm < wreck  # the spine's order
    assert heading_at(doc, "Old Ansel") == "The Keeper"  # its own <h1> is the chapter title: not twice
    assert doc.text.count("The Keeper") == 1
    assert heading_at(doc, "storm broke") == "The Storm > Night"
    assert heading_at(doc, "wreck of the Gull") == "Morning"


def test_markdown_front_matter_wiki_links_lists_tables() -> None:
    doc = read("md")
    assert doc.kind == "markdown" and doc.title == "Harbour notes"
    assert doc.metadata == {"format": "markdown", "tags": ["harbour", "tides", "projects/lighthouse"],
                            "date": "2024-05-01", "aliases": ["Port notes"], "front_matter": {"source": "interview"},
                            "links": ["East Quay", "Harbour Office"]}
    assert "Boats moor at the east quay and pay at Harbour Office." in doc.text
    assert "---" not in doc.text and "[[" not in doc.text
    assert "- Mooring: two crowns\n- Pilotage: five crowns\n◦ at night: seven crowns" in doc.text
    assert "Boat: Gull; Berth: B4" in doc.text and "tide = high + 2" in doc.text
    assert heading_at(doc, "Pilotage") == "Moorings > Fees"


def test_markdown_without_front_matter_takes_its_first_heading() -> None:
    doc = formats.extract("text/markdown", b"Intro line\n\n# The real title\n\ntext", "n.md")
    assert doc.title == "The real title" and "tags" not in doc.metadata


def test_markdown_front_matter_alias_bomb_and_odd_values_are_harmless() -> None:
    bomb = "---\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8))
    bomb += "tags: {nested: [1, 2]}\ntitle: [not, a, string]\n---\nBody words.\n"
    start = time.perf_counter()
    doc = formats.extract("text/markdown", bomb.encode(), "bomb.md")
    assert time.perf_counter() - start < 2
    assert doc.title == "bomb" and doc.metadata["tags"] == [] and "front_matter" not in doc.metadata
    assert doc.text == "Body words."


def test_html_main_content_headings_and_the_saved_address() -> None:
    doc = read("html")
    assert doc.kind == "html" and doc.title == "Tide tables of the cape"
    assert doc.metadata == {"format": "html", "description": "When the water is high",
                            "source_url": "https://tides.example.org/cape"}
    assert "Home" not in doc.text and "Copyright" not in doc.text  # the <main> alone
    assert "- New moon\n- Full moon" in doc.text and "Day: Monday; High water: 06:12" in doc.text
    assert heading_at(doc, "Full moon") == "Tide tables > Spring tides"


def test_email_subject_sender_date_body_and_attachments() -> None:
    data = fd.eml([("notes.md", "text/markdown", b"# Beacon notes\nRepairs need copper."),
                   ("tool.exe", "application/octet-stream", b"MZ\x90\x00binary"),
                   ("deck.pptx", fd.PPTX, fd.pptx())])
    doc = formats.extract("message/rfc822", data, "plan.eml")
    assert doc.kind == "email" and doc.title == "Q3 plan for the lighthouses"
    assert doc.metadata["from"] == "Ada Lovelace <ada@example.org>"
    assert doc.metadata["date"] == "2024-05-06T10:00:00+00:00"
    assert doc.metadata["attachment_names"] == ["notes.md", "tool.exe", "deck.pptx"]
    assert doc.metadata["attachments_skipped"] == 1
    assert doc.text.startswith("Subject: Q3 plan for the lighthouses\nFrom: Ada Lovelace <ada@example.org>\nTo: ")
    assert "the beacon repairs start on the first of June." in doc.text
    assert heading_at(doc, "beacon repairs") == "Q3 plan for the lighthouses"
    assert [(a.filename, a.mime) for a in doc.attachments] == [("notes.md", "text/markdown"), ("deck.pptx", fd.PPTX)]


def test_html_only_email_reads_its_html() -> None:
    doc = formats.extract("message/rfc822", fd.eml(html=True).replace(b"Content-Type: text/plain", b"X-Gone: x"),
                          "m.eml")
    assert "beacon repairs start" in doc.text


def test_rtf_csv_text_json() -> None:
    rtf = read("rtf")
    assert (rtf.kind, rtf.title) == ("document", "Keeper's log")
    assert "The lamp was lit at dusk." in rtf.text and "horn sounded until dawn" in rtf.text and "Ansel" not in rtf.text
    csv = read("csv")
    assert csv.kind == "spreadsheet" and csv.title == "ships"
    assert "Ship: Gull; Tonnage: 120; Captain: Ada" in csv.text and csv.outline.sheets[0][1] == "ships"
    assert dict(csv.outline.rows)[csv.text.index("Ship: Tern")] == 3
    txt = read("txt")
    assert (txt.kind, txt.title, txt.text) == ("text", "readme", "Plain words about the ferry timetable.\nSecond line.")
    assert read("json").text == '{"ferry": "departs at noon", "pier": 3}'


def test_a_csv_whose_lines_end_in_a_carriage_return_is_read() -> None:
    """An old Mac's CSV (lines ended by "\r" alone) was refused 422: the csv module saw a newline in a field."""
    doc = formats.extract("text/csv", fd.CSV.replace(b"\n", b"\r"), "ships.csv")
    assert "Ship: Gull; Tonnage: 120; Captain: Ada" in doc.text and "Ship: Tern; Tonnage: 80" in doc.text
    mixed = formats.extract("text/csv", b'Ship,Note\r\nGull,"two\rlines"\rTern,one\n', "mixed.csv")
    assert "Ship: Gull; Note: two" in mixed.text and "Ship: Tern; Note: one" in mixed.text, mixed.text


def test_a_sheet_of_one_row_of_words_keeps_that_row() -> None:
    """A sheet whose only row looks like a header (words, no numbers) stored nothing but its name (the attacker's
    sheet of cells at A1, XFD1 and XFD1048576 kept only `S1`): that row is the sheet's content."""
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "S1"
    ws["A1"], ws["B1"], ws["XFD1048576"] = "alpha", "beta", "past the columns read"
    data = io.BytesIO()
    wb.save(data)
    doc = formats.extract(fd.XLSX, data.getvalue(), "wide.xlsx")
    assert doc.text == "S1\nalpha; beta" and doc.metadata["rows"] == 1, doc.text
    assert formats.extract("text/csv", b"Name,Role\n", "empty.csv").text.endswith("Name; Role")


def test_a_text_past_the_cap_is_cut_and_says_so() -> None:
    doc = formats.extract("text/plain", ("word " * 5000).encode(), "w.txt", max_chars=1000)
    assert len(doc.text) <= 1000 and doc.metadata["truncated"] is True
    sheet = formats.extract(fd.XLSX, fd.xlsx(rows=200), "b.xlsx", max_chars=2000)
    assert len(sheet.text) <= 2000 and sheet.metadata["truncated"] is True


def test_old_outlines_still_read() -> None:
    assert Outline.from_json({"headings": [[0, "A"]], "pages": [[0, 1]]}) == Outline(((0, "A"),), ((0, 1),))
    doc = read("xlsx")
    assert Outline.from_json(doc.outline.to_json()) == doc.outline


# ---------------------------------------------------------------------------------------------------- hostile files

HOSTILE = {
    "a ZIP bomb": (fd.DOCX, fd.zip_bomb_docx, 422, "ZIP bomb"),
    "a ZIP declaring 1.2 GiB": (fd.DOCX, fd.declared_bomb, 422, "at most 1073741824 (1 GiB)"),
    "a billion laughs": (fd.DOCX, fd.entity_docx, 422, "entities"),
    "external entities": (fd.DOCX, lambda: fd.entity_docx(external=True), 422, "entities"),
    "a ZIP of something else": (fd.DOCX, fd.zip_of_something_else, 415, "not what its type says"),
    "a password-protected .docx": (fd.DOCX, lambda: fd.encrypted(fd.docx()), 422, "password-protected"),
    "a password-protected .xlsx": (fd.XLSX, lambda: fd.encrypted(fd.xlsx()), 422, "password-protected"),
    "a password-protected .pptx": (fd.PPTX, lambda: fd.encrypted(fd.pptx()), 422, "password-protected"),
    "an old binary .doc": (fd.DOCX, fd.legacy_doc, 415, "older binary Office file"),
    "a truncated .docx": (fd.DOCX, lambda: fd.docx()[:4000], 422, "corrupt or truncated"),
    "a truncated .pptx": (fd.PPTX, lambda: fd.pptx()[:-200], 422, "corrupt or truncated"),
    "10,001 members": (fd.DOCX, fd.many_members, 422, "at most 10000"),
    "a password-protected .odt": (fd.ODT, lambda: fd.odt(encrypted=True), 422, "password-protected"),
    "a DRM e-book": (fd.EPUB, lambda: fd.epub(drm=True), 422, "DRM"),
    "entities in an e-book": (fd.EPUB, lambda: fd.epub(entity=True), 422, "entities"),
    "an .xls sent as CSV": ("application/vnd.ms-excel", fd.legacy_doc, 415, "older binary Office file"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files_are_refused_in_words(case: str) -> None:
    mime, make, status, words = HOSTILE[case]
    data = make()
    start = time.perf_counter()
    with pytest.raises(ApiError) as exc:
        formats.extract(mime, data, "hostile")
    assert time.perf_counter() - start < 5
    assert exc.value.status == status and words in (exc.value.message or ""), exc.value.message


def test_macro_enabled_files_give_their_text_and_run_nothing() -> None:
    doc = formats.extract(fd.DOCM, fd.docm(), "memo.docm")
    assert doc.metadata["format"] == "docm" and doc.metadata["macros"] == "not run: only the text was read"
    assert "Repaint the towers" in doc.text and "AutoOpen" not in doc.text
    sheet = formats.extract(fd.XLSM, fd.xlsx(macros=True), "book.xlsm")
    assert sheet.metadata["format"] == "xlsm" and "Rent for the boathouse" in sheet.text


def _with_first_sheet(change: Callable[[bytes], bytes]) -> bytes:
    """The fixture workbook with its first sheet's XML passed through `change`."""
    src = zipfile.ZipFile(io.BytesIO(fd.xlsx(rows=1)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            body = src.read(info)
            z.writestr(info, change(body) if info.filename == "xl/worksheets/sheet1.xml" else body)
    return out.getvalue()


def _slow_xlsx(rows: int = 1_000_000) -> bytes:
    """A workbook of a million empty cells, each on a row of its own: 2.5 MB that takes seconds to read through."""
    empty = "".join(f'<row r="{r}"><c r="A{r}"/></row>' for r in range(3, rows + 3)).encode()
    return _with_first_sheet(lambda body: body.replace(b"</sheetData>", empty + b"</sheetData>"))


def _gap_xlsx() -> bytes:
    """A workbook whose second row is numbered 900 million: openpyxl's `iter_rows` made up every row between."""
    def far(body: bytes) -> bytes:
        for cell in (b"", b"A", b"B", b"C"):
            body = body.replace(b'r="' + cell + b'2"', b'r="' + cell + b'900000000"')
        return body
    return _with_first_sheet(far)


def test_a_sheet_with_a_row_far_down_is_read_at_once() -> None:
    start = time.perf_counter()
    doc = formats.extract(fd.XLSX, _gap_xlsx(), "far.xlsx")
    assert time.perf_counter() - start < 5
    assert "Item: Rent for the boathouse; Q1: 1200" in doc.text
    assert doc.metadata["rows"] == 3, doc.metadata


async def test_a_reader_that_runs_too_long_is_stopped_in_words() -> None:
    data = _slow_xlsx()
    await formats.read(fd.XLSX, fd.xlsx(), "warm.xlsx")  # the pool's children have started
    start = time.monotonic()
    with pytest.raises(ApiError) as exc:
        await formats.read(fd.XLSX, data, "slow.xlsx", seconds=2)
    assert time.monotonic() - start < 2 + offload.KILL_GRACE_SEC + 5
    assert exc.value.code == "extraction_failed" and "longer than 2 s" in (exc.value.message or "")
    doc = await formats.read(fd.XLSX, fd.xlsx(), "next.xlsx")  # the next file finds a reader
    assert "Rent for the boathouse" in doc.text


def _hungry_docx(paragraphs: int = 150_000) -> bytes:
    """A .docx of some 20 MB of document.xml that packs about 16:1 (no bomb): its tree needs far more memory than
    the 1.2 MB file suggests."""
    good = zipfile.ZipFile(io.BytesIO(fd.docx()))
    out = io.BytesIO()
    words = [f"w{i:x}" for i in range(4096)]
    body = "".join(f"<w:p><w:r><w:t>{words[i % 4096]} {words[(i * 7) % 4096]} {words[(i * 13) % 4096]}</w:t></w:r>"
                   "</w:p>" for i in range(paragraphs))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in good.infolist():
            data = good.read(info)
            if info.filename == "word/document.xml":
                text = data.decode()
                data = text.replace("<w:body>", "<w:body>" + body, 1).encode()
            z.writestr(info.filename, data)
    return out.getvalue()


async def test_a_reader_that_needs_too_much_memory_is_stopped_in_words() -> None:
    data = _hungry_docx()
    offload.shutdown()
    offload.configure(1, 0, 64 << 20)  # a bounded child may take 64 MiB more than it starts with
    try:
        with pytest.raises(ApiError) as exc:
            await formats.read(fd.DOCX, data, "hungry.docx", seconds=120)
        assert exc.value.code == "extraction_failed"
        assert "memory" in (exc.value.message or "").lower(), exc.value.message
        doc = await formats.read(fd.DOCX, fd.docx(), "next.docx")
        assert doc.title == "Q3 Plan"
    finally:
        offload.shutdown()
        offload.configure(2, 0, 1 << 30)
    assert asyncio.get_running_loop().is_running()
