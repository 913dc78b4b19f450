"""Hostile ZIPs sent to POST /api/v1/imports (issue 48 item 6, the archive's part): each is refused with words
(400 a path out of the archive, 413 a bomb or too many entries, 422 an unreadable archive) storing nothing, or its
bad entries are reported one by one while the rest is imported; the server keeps answering meanwhile."""

from __future__ import annotations

import stat
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.fixtures_archives import (
    corrupt_member,
    declared_sizes,
    entry,
    special_entries,
    tiny_files,
    zeros_bomb,
    zip_of,
    zip_with,
)
from tests.imports.test_folder_import import files_of, post_zip, run_zip
from tests.stack import Admin, User


def refused(c: httpx.Client, data: bytes, status: int, code: str) -> dict[str, Any]:
    r = post_zip(c, data)
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["error"] == code and body["message"], body
    return body


def nothing_stored(c: httpx.Client) -> None:
    assert c.get("/api/v1/imports").json()["imports"] == []
    assert c.get("/api/v1/folders").json()["folders"] == []
    assert c.get("/api/v1/source-files").json()["files"] == []


@pytest.mark.parametrize("name", ["../../etc/cron.d/evil.md", "/etc/evil.md", "Vault/../../evil.md"])
def test_a_path_out_of_the_archive_is_a_400_naming_it_and_stores_nothing(api, user: User, name: str) -> None:
    c = api(user.token(write=True))
    data = zip_with([(entry("Vault/fine.md", stat.S_IFREG | 0o644), b"# Fine\n\nA fine note.\n"),
                     (entry(name), b"# Evil\n")])
    body = refused(c, data, 400, "invalid_body")
    assert body["member"] == name and "outside the archive" in body["message"]
    nothing_stored(c)


def test_bombs_and_100000_tiny_files_are_413s_and_store_nothing(api, user: User) -> None:
    c = api(user.token(write=True))
    body = refused(c, zeros_bomb(), 413, "file_too_large")
    assert "ZIP bomb" in body["message"]
    body = refused(c, declared_sizes(zip_of({f"Big/f{n}.txt": "x" * 1000 for n in range(50)}), 45_000_000), 413,
                   "file_too_large")
    assert "LEV_IMPORT_ARCHIVE_MAX_UNPACKED" in body["message"] and body["maxBytes"] == 2 * 1024**3
    body = refused(c, tiny_files(100_000), 413, "file_too_large")
    assert body["maxFiles"] == 20_000 and "100000 entries" in body["message"]
    nothing_stored(c)


@pytest.mark.parametrize("data", [zip_of({"Vault/a.md": "# A\n\nSome words.\n"})[:-40], b"PK\x03\x04broken"],
                         ids=["truncated", "corrupt"])  # the ZIP holds the time it was made: no id of its bytes
def test_a_truncated_or_corrupt_archive_is_a_422_and_stores_nothing(api, user: User, data: bytes) -> None:
    c = api(user.token(write=True))
    body = refused(c, data, 422, "extraction_failed")
    assert "cannot be read" in body["message"]
    nothing_stored(c)


def test_links_devices_and_encrypted_entries_are_skipped_and_the_note_imported(api, user: User) -> None:
    c = api(user.token(write=True))
    body = run_zip(c, special_entries())
    assert (body["added"], body["failed"], body["skipped_total"]) == (1, 0, 5)
    assert {s["path"]: s["reason"] for s in body["skipped"]} == {
        "Vault/passwd.md": "a symbolic link (links are not followed)", "Vault/tty.md": "a device file",
        "Vault/pipe.md": "a FIFO (named pipe)", "Vault/sock.md": "a socket",
        "Vault/secret.md": "it is encrypted (password-protected)"}
    assert sorted(files_of(c, "")) == ["Vault/note.md"]


def test_a_corrupt_entry_or_a_file_that_is_not_its_type_fails_alone_saying_why(api, user: User) -> None:
    c = api(user.token(write=True))
    good = "# Good\n\nThe otters hold hands while they sleep.\n"
    data = zip_of({"Vault/good.md": good, "Vault/bad.md": "# Bad\n\n" + "lost words " * 200,
                   "Vault/fake.pdf": "not a PDF at all", "Vault/fake.docx": "not a ZIP either"})
    body = run_zip(c, corrupt_member(data, "Vault/bad.md"))
    assert (body["added"], body["failed"]) == (1, 3), body["failures"]
    errors = {f["path"]: f["error"] for f in body["failures"]}
    assert "cannot be read from the archive" in errors["Vault/bad.md"]
    assert "not application/pdf" in errors["Vault/fake.pdf"]
    assert "wordprocessingml" in errors["Vault/fake.docx"]
    assert all(f["item_id"] is None and f["line"] for f in body["failures"])
    assert sorted(files_of(c, "")) == ["Vault/good.md"]
    assert c.get("/api/v1/items").json()["total"] == 1


def probe_while(url: str, work: Callable[[], Any]) -> tuple[Any, list[float]]:
    """Run `work` on a thread while asking /healthz; its result and the probes' latencies."""
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.setdefault("result", work()))
    waits: list[float] = []
    with httpx.Client(base_url=url, timeout=60) as probe:
        probe.get("/healthz")
        thread.start()
        while thread.is_alive():
            t0 = time.monotonic()
            assert probe.get("/healthz").status_code == 200
            waits.append(time.monotonic() - t0)
            time.sleep(0.02)
    thread.join()
    return out.get("result"), waits


def test_the_server_keeps_answering_while_hostile_archives_are_read(api, user: User, server, admin: Admin) -> None:
    """100,000 entries are refused by the end record; a bomb's small directory is read on a thread, a large one
    (1,500 files) in a child process: none holds a request up (the p99 under load is bench/archives.py's)."""
    c = api(user.token(write=True))
    c.timeout = httpx.Timeout(600)  # a cold child process starts slowly on a loaded machine

    def hostile() -> list[httpx.Response]:
        return [post_zip(c, data) for data in (tiny_files(100_000), zeros_bomb(), tiny_files(1500))]

    answers, waits = probe_while(server.url, hostile)
    assert [r.status_code for r in answers] == [413, 413, 202], [r.text[:200] for r in answers]
    assert answers[2].json()["total"] == 1500
    # its files are not ingested: the session's server has other tests to serve
    admin.sql("UPDATE import_entries SET status = 'done' WHERE import_id = :i AND status = 'pending'",
              i=answers[2].json()["id"])
    assert waits, "no health check was made while the archives were read"
