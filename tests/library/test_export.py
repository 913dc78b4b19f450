"""GET /api/v1/export: the library as JSON Lines, and the round trip export -> import into a new account that
reproduces folders, items, memberships, flags, metadata and outputs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fixtures_imports import pocket_csv
from tests.imports.test_imports import run_import
from tests.sites import Site
from tests.stack import new_user


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def export(c: httpx.Client) -> list[dict[str, Any]]:
    with c.stream("GET", "/api/v1/export") as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("application/x-ndjson")
        assert r.headers["content-disposition"].startswith('attachment; filename="lev-export-')
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert lines[0]["type"] == "lev_export" and lines[0]["version"] == 1
    counts = {k: sum(1 for line in lines if line["type"] == k[:-1])
              for k in ("folders", "items", "outputs", "highlights")}
    copies = [line["archive"] for line in lines if line["type"] == "item" and "archive" in line]
    counts.update(archives=len(copies), archive_bytes=sum(a["size_bytes"] for a in copies))
    assert lines[-1] == {"type": "end", **counts}
    return lines


def library(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """What a user sees of a library, without ids and times."""
    names = {line["id"]: line["name"] for line in lines if line["type"] == "folder"}
    outputs: dict[str, list[tuple[str, str, str]]] = {}
    for line in lines:
        if line["type"] == "output":
            outputs.setdefault(line["item_id"], []).append(
                (line["kind"], json.dumps(line["content"], sort_keys=True), line["generator"]))
    items = sorted(
        (line.get("url") or line.get("text"), line["kind"], line["title"], line["in_kb"], line["archived"],
         line["status"], line["error"], tuple(sorted(names[f] for f in line["folder_ids"])), tuple(line["tags"]),
         json.dumps(line["metadata"], sort_keys=True), tuple(sorted(outputs.get(line["id"], []))))
        for line in lines if line["type"] == "item")
    return {"folders": sorted(names.values()), "items": items}


def test_export_then_import_into_a_new_account_reproduces_the_library(api, user, admin, site: Site) -> None:
    a = api(user.token(write=True, kb_only=False))
    birds, reading = user.folder("Birds"), user.folder("Reading")
    user.folder("Empty for now")
    herons = a.post("/api/v1/ingest", json={"kind": "text", "title": "Herons", "auto_transform": True,
                                            "text": "Grey herons wade in shallow marshes and spear fish."}).json()
    note = a.post("/api/v1/ingest", json={"kind": "text", "text": "Ring the bird sanctuary about the boat.",
                                          "in_kb": False, "auto_transform": False}).json()
    page = a.post("/api/v1/ingest", json={"kind": "url", "url": f"{site.url}/volcano", "auto_transform": False}).json()
    for item, folders in ((herons, [birds]), (note, [birds, reading]), (page, [reading])):
        assert a.post(f"/api/v1/items/{item['user_item_id']}/folders", json={"folder_ids": folders}).status_code == 200
    assert a.patch(f"/api/v1/items/{note['user_item_id']}", json={"archived": True}).status_code == 200
    tagged = run_import(a, pocket_csv([{"title": "Article 21", "url": f"{site.url}/a/21", "tags": "x|y"},
                                       {"title": "Gone", "url": f"{site.url}/missing"}]), "pocket.csv")
    assert (tagged["done"], tagged["failed"]) == (1, 1)
    deadline = time.monotonic() + 60
    while not a.get(f"/api/v1/items/{herons['user_item_id']}").json()["outputs"]:
        assert time.monotonic() < deadline, "the transform never ran"
        time.sleep(0.3)

    exported = export(a)
    mine = library(exported)
    assert mine["folders"] == ["Birds", "Empty for now", "Reading"]
    assert len(mine["items"]) == 5
    by_title = {line["title"]: line for line in exported if line["type"] == "item"}
    assert by_title["Herons"]["text"].startswith("Grey herons") and "url" not in by_title["Herons"]
    assert by_title["Article 21"]["tags"] == ["x", "y"] and "text" not in by_title["Article 21"]
    assert by_title["Gone"]["status"] == "failed"
    assert any(line["type"] == "output" and line["item_id"] == herons["user_item_id"] for line in exported)
    # a kb_only token exports what it can see: the not-in-KB note is left out
    assert len([line for line in export(api(user.token())) if line["type"] == "item"]) == 4

    newcomer = new_user(admin)
    b = api(newcomer.token(write=True, kb_only=False))
    data = "".join(json.dumps(line) + "\n" for line in exported).encode()
    done = run_import(b, data, "lev-export.jsonl")
    assert (done["format"], done["total"], done["done"], done["failed"]) == ("lev", 5, 4, 1), done
    assert library(export(b)) == mine
    again = run_import(b, data, "lev-export.jsonl")  # nothing twice
    assert again["already_present"] == 5 and library(export(b)) == mine


def test_export_pages_through_a_larger_library(api, user) -> None:
    c = api(user.token(write=True, kb_only=False))
    lines = b"".join(json.dumps(line).encode() + b"\n" for line in [
        {"type": "lev_export", "version": 1},
        *({"type": "item", "id": f"n{i}", "text": f"Note number {i} about tide tables.", "title": f"Note {i}"}
          for i in range(201)),
        {"type": "end"}])
    done = run_import(c, lines, "notes.jsonl")
    assert done["done"] == 201
    items = [line for line in export(c) if line["type"] == "item"]
    assert sorted(line["title"] for line in items) == sorted(f"Note {i}" for i in range(201))  # every one, once
    stamps = [line["created_at"] for line in items]
    assert stamps == sorted(stamps)  # oldest first, across the export's pages of 200
