"""POST /api/v1/imports with a ZIP of a folder (issue 48 item 4): sub-folders become folders named by their path,
every supported file an item read as its upload would be, the rest counted and reported; the same archive again
adds nothing; a changed file updates its item in place (same id, new text, re-indexed; highlights without words
reported); GET /api/v1/source-files lists what the paths made."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.fixtures_archives import NOTES, zip_of
from tests.stack import User

PLAN = "Vault/Projects/Plan.md"


def post_zip(c: httpx.Client, data: bytes, name: str = "vault.zip", **form: str) -> httpx.Response:
    return c.post("/api/v1/imports", files={"file": (name, data, "application/zip")}, data=form or None)


def wait_done(c: httpx.Client, import_id: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        r = c.get(f"/api/v1/imports/{import_id}")
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        if body["status"] == "done":
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.3)


def run_zip(c: httpx.Client, data: bytes, name: str = "vault.zip", **form: str) -> dict[str, Any]:
    r = post_zip(c, data, name, **form)
    assert r.status_code == 202, r.text
    assert r.json()["format"] == "zip"
    return wait_done(c, r.json()["id"])


def files_of(c: httpx.Client, prefix: str) -> dict[str, dict[str, Any]]:
    r = c.get("/api/v1/source-files", params={"prefix": prefix})
    assert r.status_code == 200, r.text
    return {f["path"]: f for f in r.json()["files"]}


def search(c: httpx.Client, q: str) -> list[dict[str, Any]]:
    r = c.get("/api/v1/search", params={"q": q, "mode": "keyword"})
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


def test_a_vault_imported_twice_then_changed_adds_once_and_updates_in_place(api, user: User) -> None:
    c = api(user.token(write=True, kb_only=False))
    first = run_zip(c, zip_of(NOTES))
    assert (first["total"], first["added"], first["updated"], first["unchanged"], first["failed"]) == (4, 4, 0, 0, 0)
    assert first["skipped_total"] == 3 and {s["path"] for s in first["skipped"]} == {
        "Vault/.obsidian/workspace.json", "Vault/.DS_Store", "Vault/Attachments/tool.exe"}
    assert sorted(f["name"] for f in first["folders"]) == [
        "Vault", "Vault/Daily", "Vault/Projects", "Vault/Projects/Notes"]
    assert first["folders_created"] == 4 and all(f["item_count"] == 1 for f in first["folders"])
    kept = files_of(c, "Vault/")
    assert sorted(kept) == ["Vault/Daily/2026-05-01.txt", "Vault/Projects/Notes/Ideas.md", PLAN, "Vault/Welcome.md"]
    plan_id = kept[PLAN]["item_id"]
    item = c.get(f"/api/v1/items/{plan_id}").json()
    assert item["status"] == "ready" and "glacier survey" in item["text"]
    # each file is read as its upload would be: Markdown with its front matter, text as text
    welcome = c.get(f"/api/v1/items/{kept['Vault/Welcome.md']['item_id']}").json()
    assert (welcome["kind"], welcome["title"]) == ("markdown", "Welcome to the vault")
    daily = c.get(f"/api/v1/items/{kept['Vault/Daily/2026-05-01.txt']['item_id']}").json()
    assert daily["kind"] == "text" and "water wheel" in daily["text"]
    projects = next(f["id"] for f in first["folders"] if f["name"] == "Vault/Projects")
    assert item["folder_ids"] == [projects]
    assert [h["item_id"] for h in search(c, "glacier survey")] == [plan_id]

    again = run_zip(c, zip_of(NOTES))
    assert (again["added"], again["updated"], again["unchanged"], again["folders_created"]) == (0, 0, 4, 0)
    assert c.get("/api/v1/items", params={"per_page": 100}).json()["total"] == 4
    assert files_of(c, "Vault/") == kept  # nothing rewritten

    kept_mark = c.post(f"/api/v1/items/{plan_id}/highlights", json={"text": "Q3 plan", "note": "still here"})
    lost_mark = c.post(f"/api/v1/items/{plan_id}/highlights", json={"text": "before the autumn storms",
                                                                   "note": "the deadline"})
    assert kept_mark.status_code == 201 and lost_mark.status_code == 201, lost_mark.text
    changed = {**NOTES, PLAN: "# Q3 plan\n\nThe Q3 plan now ships the ice-core drilling in spring.\n"}
    third = run_zip(c, zip_of(changed))
    assert (third["added"], third["updated"], third["unchanged"]) == (0, 1, 3), [f["error"] for f in third["failures"]]
    assert third["highlights_lost"] == [{"path": PLAN, "item_id": plan_id,
                                         "highlights": [{"text": "before the autumn storms", "note": "the deadline"}]}]
    now = files_of(c, "Vault/")
    assert now[PLAN]["item_id"] == plan_id and now[PLAN]["sha256"] != kept[PLAN]["sha256"]
    assert {p: f["sha256"] for p, f in now.items() if p != PLAN} == {
        p: f["sha256"] for p, f in kept.items() if p != PLAN}
    item = c.get(f"/api/v1/items/{plan_id}").json()
    assert "ice-core drilling" in item["text"] and "glacier" not in item["text"] and item["folder_ids"] == [projects]
    assert [h["item_id"] for h in search(c, "ice-core drilling")] == [plan_id]
    assert search(c, "glacier survey") == []
    marks = c.get(f"/api/v1/items/{plan_id}/highlights").json()["highlights"]
    assert [(m["text"], m["note"]) for m in marks] == [("Q3 plan", "still here")]
    assert c.get("/api/v1/items", params={"per_page": 100}).json()["total"] == 4


def test_a_folder_names_the_archives_top_and_files_at_its_top_go_in_it(api, user: User) -> None:
    c = api(user.token(write=True))
    body = run_zip(c, zip_of({"a.md": "# Alpha\n\nAlpha particles.\n", "sub/b.md": "# Beta\n\nBeta decay.\n"}),
                   "Export-1234.zip")
    assert sorted(f["name"] for f in body["folders"]) == ["Export-1234", "Export-1234/sub"]
    body = run_zip(c, zip_of({"Vault/c.md": "# Gamma\n\nGamma rays.\n"}), folder="Notes")
    assert [f["name"] for f in body["folders"]] == ["Notes"] and sorted(files_of(c, "Notes/")) == ["Notes/c.md"]
