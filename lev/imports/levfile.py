"""Reading a Lev export (`GET /api/v1/export`, JSON Lines) back as an import: its folders, its items (a URL, or
the text of items without one) with their metadata, tags, flags and memberships, and their outputs.

Each line is read by lev.core.jsonguard (at most 100,000 values a line, no NUL or lone surrogate in a string, no
number a column cannot hold); titles, metadata and outputs are cut to their bounds (lev.imports.importfile)."""

from __future__ import annotations

from typing import Any

from lev.core import jsonguard
from lev.imports.importfile import (
    LEV_EXPORT_TYPE,
    LEV_EXPORT_VERSION,
    MAX_METADATA_CHARS,
    MAX_OUTPUT_CHARS,
    MAX_OUTPUTS,
    MAX_TAG_CHARS,
    MAX_TEXT_CHARS,
    Link,
    Parsed,
    bad_file,
    bounded,
    check_url,
    merge_tags,
    title_of,
)

MAX_LINE_VALUES = 100_000  # JSON values in one line (a long text is one)


def parse_lev(text: str) -> Parsed:
    parsed = Parsed("lev")
    items: dict[str, Link] = {}
    ended = header = False
    number = 0
    lines = text.split("\n")  # not splitlines: U+2028 may stand in a string
    if lines[-1] == "":
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if ended:
            raise bad_file(number, "nothing may follow the export's end line")
        try:
            record = jsonguard.loads(raw, max_values=MAX_LINE_VALUES)
        except jsonguard.BadJson as exc:
            raise bad_file(number, f"not JSON ({exc})" if not exc.parsed else str(exc)) from None
        if not isinstance(record, dict):
            raise bad_file(number, "each line must be a JSON object")
        kind = record.get("type")
        if not header:
            header = True
            if kind != LEV_EXPORT_TYPE:
                raise bad_file(number, f"a Lev export starts with a {LEV_EXPORT_TYPE!r} line")
            if record.get("version") != LEV_EXPORT_VERSION:
                raise bad_file(number, f"unknown Lev export version {record.get('version')!r}")
            continue
        if kind == "folder":
            _lev_folder(parsed, number, record)
        elif kind == "item":
            item_id, link = _lev_item(parsed, number, record)
            if item_id in items:
                raise bad_file(number, f"item {item_id} appears twice")
            items[item_id] = link
            if link.url is not None or link.text is not None:
                parsed.links.append(link)
        elif kind == "output":
            _lev_output(items, number, record)
        elif kind == "highlight":  # the exporter's highlights: read by other tools, not imported (decisions.md)
            if _field(number, record, "item_id", str, True) not in items:
                raise bad_file(number, "the highlight belongs to an item no earlier item line defines")
        elif kind == "end":
            ended = True
        else:
            raise bad_file(number, f"unknown line type {kind!r} (expected folder, item, output, highlight or end)")
    if not ended:
        raise bad_file(number + 1, "the export has no end line (was it cut short?)")
    return parsed


def _field(number: int, record: dict[str, Any], name: str, types: type | tuple[type, ...],
           required: bool = False) -> Any:
    value = record.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, types) or isinstance(value, bool) and bool not in (
            types if isinstance(types, tuple) else (types,)):
        raise bad_file(number, f"{name} is missing or of the wrong type")
    return value


def _lev_folder(parsed: Parsed, number: int, record: dict[str, Any]) -> None:
    folder_id = _field(number, record, "id", str, True)
    name = _field(number, record, "name", str, True).strip()
    if not name or "\x00" in name:
        raise bad_file(number, "a folder needs a name")
    if folder_id in parsed.folders:
        raise bad_file(number, f"folder {folder_id} appears twice")
    parsed.folder(folder_id, [name], number)


def _lev_item(parsed: Parsed, number: int, record: dict[str, Any]) -> tuple[str, Link]:
    item_id = _field(number, record, "id", str, True)
    url = _field(number, record, "url", str)
    text = _field(number, record, "text", str)
    if url is None and (text is None or not text.strip()):
        raise bad_file(number, "an item needs a url or a text")
    folder_ids = _field(number, record, "folder_ids", list) or []
    if not all(isinstance(f, str) for f in folder_ids):
        raise bad_file(number, "folder_ids must list folder ids (strings)")
    missing = [f for f in folder_ids if f not in parsed.folders]
    if missing:
        raise bad_file(number, f"the item names folder {missing[0]!r}, which no earlier folder line defines")
    metadata = bounded(_field(number, record, "metadata", dict) or {}, MAX_METADATA_CHARS)
    tags = _field(number, record, "tags", list)  # an export's tags (an older one kept them in `metadata.tags`)
    if tags:
        earlier = metadata.get("tags") if isinstance(metadata.get("tags"), list) else []
        metadata["tags"] = merge_tags([t for t in earlier if isinstance(t, str)],
                                      [t[:MAX_TAG_CHARS] for t in tags if isinstance(t, str)])
    title = title_of(_field(number, record, "title", str))
    link = Link(line=number, title=title, folders=list(dict.fromkeys(folder_ids)), metadata=metadata,
                in_kb=_field(number, record, "in_kb", bool) is not False,
                archived=_field(number, record, "archived", bool) is True)
    if url is not None:
        link.url = check_url(parsed, number, url)
    elif len(text or "") > MAX_TEXT_CHARS:
        raise bad_file(number, f"the text is longer than {MAX_TEXT_CHARS} characters")
    else:
        link.text = text
    return item_id, link


def _lev_output(items: dict[str, Link], number: int, record: dict[str, Any]) -> None:
    item_id = _field(number, record, "item_id", str, True)
    if item_id not in items:
        raise bad_file(number, f"the output belongs to item {item_id!r}, which no earlier item line defines")
    kind = _field(number, record, "kind", str, True)
    generator = _field(number, record, "generator", str, True)
    if "content" not in record:
        raise bad_file(number, "an output needs its content")
    outputs = items[item_id].outputs
    if len(outputs) < MAX_OUTPUTS:  # more outputs of one item are left out
        outputs.append({"kind": kind[:100], "content": bounded(record["content"], MAX_OUTPUT_CHARS),
                        "generator": generator[:100]})
