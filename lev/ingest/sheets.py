"""Spreadsheets read into a `Layout`, a row a line that names its columns (`Item: Rent; Q1: 1200`), each sheet a
heading with its rows marked (sheet, row number): .xlsx and .xlsm by openpyxl in read-only mode (rows streamed,
cached values, no macro run), .ods by lxml's streamed parser (repeated rows and cells bounded), CSV and TSV by the
csv module. A sheet's first row names the columns when it is all text; otherwise columns go by their letters."""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterable, Iterator
from typing import Any

from lxml import etree
from openpyxl import load_workbook
from openpyxl.worksheet._reader import WorkSheetParser

from lev.core.errors import extraction_failed
from lev.ingest.containers import PARSER_OPTIONS, is_compound, open_zip, refuse_compound
from lev.ingest.layout import MAX_COLUMNS, Document, Layout, row_line
from lev.ingest.markup import decode

MAX_REPEAT = 1000  # a repeated row or cell of an .ods is written at most this often (empty ones not at all)
CSV_FIELD_MAX = 1 << 20
_XLSX = ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "application/vnd.ms-excel.sheet."
         "macroenabled.12")
_ODS = "application/vnd.oasis.opendocument.spreadsheet"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"


def read(data: bytes, mime: str, name: str, max_chars: int) -> Document:
    """A spreadsheet of `mime`; a CSV's one sheet is named `name` (its file's stem)."""
    if mime in _XLSX:
        return _xlsx(data, max_chars)
    if mime == _ODS:
        return _ods(data, max_chars)
    return _csv(data, mime, name or "Sheet 1", max_chars)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "isoformat"):
        text = value.isoformat()
        return text[:-9] if text.endswith("T00:00:00") else text
    return str(value)


def write_rows(layout: Layout, rows: Iterable[tuple[int, list[str]]]) -> int:
    """A sheet's rows (row number, cell texts) as lines naming their columns; the rows written."""
    header: list[str] | None = None
    header_at = 0
    written = 0
    for number, cells in rows:
        if not any(c.strip() for c in cells):
            continue
        if header is None:
            if all(not c.strip() or not _numeric(c) for c in cells) and sum(1 for c in cells if c.strip()) >= 1:
                header, header_at = [" ".join(c.split()) for c in cells[:MAX_COLUMNS]], number
                continue
            header = []
        if not layout.row(number, row_line(header, cells)):
            break
        written += 1
    if not written and header:  # a sheet of one row of words: that row is its content, not a header
        written += int(layout.row(header_at, "; ".join(c for c in header if c)))
    return written


def _numeric(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


# ----------------------------------------------------------------------------------------------------------- .xlsx

def _xlsx(data: bytes, max_chars: int) -> Document:
    if is_compound(data):
        raise refuse_compound(data, ".xlsx file")
    zf = open_zip(data, ".xlsx file", ["xl/workbook.xml"])
    macros = any(n.lower().endswith("vbaproject.bin") for n in zf.namelist())
    zf.close()
    try:
        wb = load_workbook(io.BytesIO(data), read_only=True, data_only=True, keep_vba=False, keep_links=False)
    except (KeyError, ValueError, TypeError, zipfile.BadZipFile, etree.XMLSyntaxError, OSError) as exc:
        raise extraction_failed(f"The .xlsx file could not be read (corrupt?): {str(exc)[:200]}") from None
    layout = Layout(max_chars)
    sheets = rows = 0
    try:
        for ws in wb.worksheets:
            if layout.truncated:
                break
            layout.sheet(ws.title)
            sheets += 1
            rows += write_rows(layout, _xlsx_rows(ws))
        title = (wb.properties.title or "").strip() or None
        meta: dict[str, Any] = {"format": "xlsm" if macros else "xlsx", "sheet_count": len(wb.sheetnames),
                                "rows": rows}
        if macros:
            meta["macros"] = "not run: only the text was read"
        if (wb.properties.creator or "").strip():
            meta["author"] = wb.properties.creator.strip()[:500]
    except (KeyError, ValueError, TypeError, zipfile.BadZipFile, etree.XMLSyntaxError, EOFError, OSError) as exc:
        raise extraction_failed(f"The .xlsx file could not be read (corrupt or truncated?): {str(exc)[:200]}") \
            from None
    finally:
        wb.close()
    return layout.document("spreadsheet", title, meta)


def _xlsx_rows(ws: Any) -> Iterator[tuple[int, list[str]]]:
    """A sheet's rows that are in its file, with their numbers, whatever its declared dimensions say. Read with
    openpyxl's own row parser: its `iter_rows` makes up every missing row from row 1 on, so a file whose second row
    is numbered 900 million ran for hours."""
    wb = ws.parent
    with ws._get_source() as src:
        parser = WorkSheetParser(src, ws._shared_strings, data_only=True, epoch=wb.epoch,
                                 date_formats=wb._date_formats, timedelta_formats=wb._timedelta_formats)
        for number, cells in parser.parse():
            if not cells:
                continue
            row = ws._get_row(cells, 1, MAX_COLUMNS, values_only=True)
            if row.count(None) != len(row):
                yield number, [_cell(v) for v in row]


# ------------------------------------------------------------------------------------------------------------ .ods

def _ods(data: bytes, max_chars: int) -> Document:
    zf = open_zip(data, ".ods file", ["content.xml"])
    layout = Layout(max_chars)
    rows = sheets = 0
    try:
        with zf.open("content.xml") as content:
            for name, sheet_rows in _ods_tables(content):
                layout.sheet(name)
                sheets += 1
                rows += write_rows(layout, sheet_rows)
                if layout.truncated:
                    break
    except (etree.XMLSyntaxError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise extraction_failed(f"The .ods file could not be read (corrupt or truncated?): {str(exc)[:200]}") \
            from None
    return layout.document("spreadsheet", None, {"format": "ods", "sheet_count": sheets, "rows": rows})


def _ods_tables(stream: Any) -> Iterator[tuple[str, Iterator[tuple[int, list[str]]]]]:
    """Each table of an ODF spreadsheet and its rows, streamed (a row's element is freed once read)."""
    events = etree.iterparse(stream, events=("start", "end"), **PARSER_OPTIONS)
    for event, el in events:
        if event == "start" and el.tag == f"{{{_TABLE}}}table":
            yield el.get(f"{{{_TABLE}}}name") or "Sheet", _ods_rows(events)


def _ods_rows(events: Any) -> Iterator[tuple[int, list[str]]]:
    number = 0
    for event, el in events:
        if event == "end" and el.tag == f"{{{_TABLE}}}table-row":
            cells = _ods_cells(el)
            repeat = _repeat(el, "number-rows-repeated")
            for _ in range(min(repeat, MAX_REPEAT) if any(cells) else 0):
                number += 1
                yield number, cells
            number += repeat - (min(repeat, MAX_REPEAT) if any(cells) else 0)
            el.clear()
        elif event == "end" and el.tag == f"{{{_TABLE}}}table":
            el.clear()
            return


def _repeat(el: Any, name: str) -> int:
    try:
        return max(1, int(el.get(f"{{{_TABLE}}}{name}") or 1))
    except ValueError:
        return 1


def _ods_cells(row: Any) -> list[str]:
    cells: list[str] = []
    for cell in row:
        if cell.tag not in (f"{{{_TABLE}}}table-cell", f"{{{_TABLE}}}covered-table-cell"):
            continue
        text = "\n".join("".join(p.itertext()) for p in cell.iter(f"{{{_TEXT}}}p"))
        value = text or cell.get(f"{{{_OFFICE}}}value") or ""
        repeat = _repeat(cell, "number-columns-repeated")
        cells.extend([value] * min(repeat if value else 1, MAX_COLUMNS - len(cells)))
        if len(cells) >= MAX_COLUMNS:
            break
    while cells and not cells[-1]:
        cells.pop()
    return cells


# ------------------------------------------------------------------------------------------------------ CSV and TSV

def _csv(data: bytes, mime: str, name: str, max_chars: int) -> Document:
    if is_compound(data):  # an old binary .xls sent as application/vnd.ms-excel
        raise refuse_compound(data, ".xls file")
    text = decode(data).replace("\x00", "")
    delimiter = "\t" if mime == "text/tab-separated-values" else _delimiter(text[:65536])
    layout = Layout(max_chars)
    layout.sheet(name)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)  # "\r" ends a line too
    csv.field_size_limit(CSV_FIELD_MAX)
    try:
        rows = write_rows(layout, ((reader.line_num, row) for row in reader))
    except csv.Error as exc:
        raise extraction_failed(f"The CSV file could not be read: {exc}") from None
    return layout.document("spreadsheet", None, {"format": "tsv" if delimiter == "\t" else "csv", "rows": rows})


def _delimiter(sample: str) -> str:
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","
