"""Reading a ZIP of a folder (lev/imports/archive.py): where each file goes (`Vault/Projects/plan.md`, folders named
by their path), what is skipped and why, and the archives refused before anything is stored (issue 48 items 4, 6)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lev.core import sourcepath
from lev.core.contract import ecma_pattern
from lev.core.errors import ApiError
from lev.core.mimes import NAME_MIME, mime_for_name
from lev.imports.archive import Limits, Listing, Refused, is_zip, read_listing
from lev.ingest.formats import mime_for
from tests.fixtures_archives import (
    NOTES,
    declared_sizes,
    entry,
    special_entries,
    tiny_files,
    zeros_bomb,
    zip_of,
    zip_with,
)

LIMITS = Limits(max_files=20_000, max_unpacked=2 * 1024**3, max_bytes=512 * 1024**2, max_file=52428800)


def listing(tmp_path: Path, data: bytes, filename: str | None = "vault.zip", root: str | None = None,
            limits: Limits = LIMITS) -> Listing:
    path = tmp_path / "a.zip"
    path.write_bytes(data)
    return read_listing(str(path), len(data), filename, root, limits)


def refused(tmp_path: Path, data: bytes, status: int, code: str, limits: Limits = LIMITS) -> ApiError:
    with pytest.raises(Refused) as exc:
        listing(tmp_path, data, limits=limits)
    err = ApiError(exc.value.code, exc.value.message, **exc.value.extra)  # as the import answers it
    assert (err.status, err.code) == (status, code), err.message
    return err


def test_a_vault_maps_to_folders_named_by_their_path_and_junk_is_skipped_with_reasons(tmp_path: Path) -> None:
    found = listing(tmp_path, zip_of(NOTES))
    assert [(m.path, m.folder, m.mime) for m in found.members] == [
        ("Vault/Welcome.md", "Vault", "text/markdown"),
        ("Vault/Projects/Plan.md", "Vault/Projects", "text/markdown"),
        ("Vault/Projects/Notes/Ideas.md", "Vault/Projects/Notes", "text/markdown"),
        ("Vault/Daily/2026-05-01.txt", "Vault/Daily", "text/plain"),
    ]
    assert found.folders == ["Vault", "Vault/Projects", "Vault/Projects/Notes", "Vault/Daily"]
    reasons = {s["path"]: s["reason"] for s in found.skipped}
    assert reasons == {"Vault/.obsidian/workspace.json": "a hidden or system file",
                       "Vault/.DS_Store": "a hidden or system file",
                       "Vault/Attachments/tool.exe": "Lev does not keep this type (.exe)"}
    assert found.skipped_total == 3 and found.unpacked == sum(m.size for m in found.members)


def test_files_at_the_top_go_in_a_folder_named_by_the_archive_or_the_callers_name(tmp_path: Path) -> None:
    data = zip_of({"a.md": "# A\n", "sub/b.md": "# B\n", "__MACOSX/._a.md": "junk"})
    assert [m.path for m in listing(tmp_path, data, "Notion Export.zip").members] == [
        "Notion Export/a.md", "Notion Export/sub/b.md"]
    assert [m.path for m in listing(tmp_path, data, None).members] == ["Import/a.md", "Import/sub/b.md"]
    named = listing(tmp_path, zip_of({"Vault/x/c.md": "# C\n"}), root="Notes")  # the one top folder renamed
    assert [(m.path, m.folder) for m in named.members] == [("Notes/x/c.md", "Notes/x")]


def test_links_devices_fifos_sockets_and_encrypted_entries_are_skipped_never_followed(tmp_path: Path) -> None:
    found = listing(tmp_path, special_entries())
    assert [m.path for m in found.members] == ["Vault/note.md"]
    assert {s["path"]: s["reason"] for s in found.skipped} == {
        "Vault/passwd.md": "a symbolic link (links are not followed)", "Vault/tty.md": "a device file",
        "Vault/pipe.md": "a FIFO (named pipe)", "Vault/sock.md": "a socket",
        "Vault/secret.md": "it is encrypted (password-protected)"}


@pytest.mark.parametrize("name", ["../evil.md", "Vault/../../evil.md", "/etc/evil.md", "C:/evil.md",
                                  "Vault\\..\\..\\evil.md"])
def test_a_path_out_of_the_archive_refuses_it_naming_the_entry(tmp_path: Path, name: str) -> None:
    data = zip_with([(entry("Vault/fine.md", stat.S_IFREG | 0o644), b"# fine\n"), (entry(name), b"# evil\n")])
    err = refused(tmp_path, data, 400, "invalid_body")
    assert err.extra["member"] == name and "outside the archive" in (err.message or "")


def test_too_many_entries_are_refused_before_any_is_read(tmp_path: Path) -> None:
    err = refused(tmp_path, tiny_files(1001), 413, "file_too_large", Limits(1000, 10**9, 10**9, 52428800))
    assert err.extra["maxFiles"] == 1000 and "1001 entries" in (err.message or "")


def test_100000_tiny_files_are_refused_at_the_default_cap(tmp_path: Path) -> None:
    err = refused(tmp_path, tiny_files(100_000), 413, "file_too_large")
    assert err.extra["maxFiles"] == 20_000 and "100000 entries" in (err.message or "")


def test_an_end_record_that_understates_its_entries_is_caught_by_the_directory_itself(tmp_path: Path) -> None:
    data = bytearray(tiny_files(1001))
    at = data.rfind(b"PK\x05\x06")
    data[at + 8:at + 12] = b"\x05\x00\x05\x00"  # says 5
    refused(tmp_path, bytes(data), 413, "file_too_large", Limits(1000, 10**9, 10**9, 52428800))


def test_a_zip_bomb_is_refused_by_its_ratio_and_by_the_total_it_declares(tmp_path: Path) -> None:
    bomb = zeros_bomb()
    assert len(bomb) < 1024 * 1024  # 72 MiB of zeros
    err = refused(tmp_path, bomb, 413, "file_too_large")
    assert "ZIP bomb" in (err.message or "")
    declared = declared_sizes(zip_of({f"Big/f{n}.txt": "x" * 1000 for n in range(50)}), 45_000_000)
    err = refused(tmp_path, declared, 413, "file_too_large")
    assert "unpack to 2250000000 bytes" in (err.message or "") and err.extra["maxBytes"] == 2 * 1024**3


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_files_past_an_uploads_size_empty_files_repeated_paths_and_nested_zips_are_skipped(tmp_path: Path) -> None:
    data = declared_sizes(zip_of({"V/big.pdf": "x"}), 60_000_000)
    assert listing(tmp_path, data).skipped[0]["reason"] == "larger than an upload may be (52428800 bytes)"
    data = zip_with([(entry("V/a.md"), b"# one\n"), (entry("V/a.md"), b"# two\n"), (entry("V/e.md"), b""),
                     (entry("V/inner.zip"), b"PK\x05\x06" + b"\x00" * 18)])
    found = listing(tmp_path, data)
    assert [(m.line, m.path) for m in found.members] == [(1, "V/a.md")]
    assert [s["reason"] for s in found.skipped] == ["the archive holds this path twice (the first is kept)",
                                                   "it is empty", "an archive inside the archive (not opened)"]


@pytest.mark.parametrize("data", [b"PK\x03\x04" + b"\x00" * 100, zip_of(NOTES)[:-30], b"not a zip at all"],
                         ids=["headers-only", "truncated", "not-a-zip"])  # a ZIP holds the time it was made
def test_a_truncated_or_corrupt_archive_is_a_422(tmp_path: Path, data: bytes) -> None:
    err = refused(tmp_path, data, 422, "extraction_failed")
    assert "cannot be read" in (err.message or "")


def test_a_zip_is_known_by_its_magic_bytes_or_its_name() -> None:
    assert is_zip(b"PK\x03\x04", None) and is_zip(b"PK\x05\x06", "x.html") and is_zip(b"<!DO", "Vault.ZIP")
    assert not is_zip(b"<!DO", "bookmarks.html") and not is_zip(b"url,", None)


def test_a_zips_files_are_typed_by_name_as_uploads_are() -> None:
    """The reader's own table (it must not import the readers) answers what lev.ingest.formats does."""
    names = [f"note{ext}" for ext in NAME_MIME] + ["a.exe", "b", "c.ZIP", "d.MD", "e.Docx"]
    assert {n: mime_for_name(n) for n in names} == {n: mime_for(n) for n in names}


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", "Vault", " ", ".", "..", ".x", "\u3000", "\x01", "é", "a b", ""]),
                min_size=1, max_size=6).map("/".join))
def test_the_schemas_source_path_pattern_is_the_servers_rule(value: str) -> None:
    """openapi.yaml's `source_path` pattern (read as clients read it, ECMA-262) refuses exactly what the server
    refuses (but the length, which maxLength states)."""
    assert bool(ecma_pattern(sourcepath.PATTERN).search(value)) == (sourcepath.problem(value) is None), value
