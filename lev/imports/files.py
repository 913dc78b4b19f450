"""A ZIP of a folder as an import: recorded (the archive kept in the object store while the import runs, each of its
files an entry with its source path, the folders its paths name created) and, in the import job, each file read
from the archive and kept as an upload of that file is (`lev.ingest.uploads.keep_upload`): a new item, its path's
item updated in place, or nothing when the path's item was made from the same bytes (SHA-256).

A member is read with a hard bound (what its entry declares, at most an upload's 50 MB; a member whose data says
otherwise fails its CRC check), never written under its own name: nothing an archive holds reaches a path of the
file system but a temporary file's.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import uuid
import zipfile
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from lev.auth.policy import Principal
from lev.core import clock
from lev.core.errors import ApiError, extraction_failed, file_too_large
from lev.imports.archive import Limits, Listing, Refused, check_end, read_listing
from lev.ingest.acquire import Source
from lev.ingest.media import MAX_UPLOAD_BYTES
from lev.ingest.uploads import keep_upload
from lev.plumbing import offload
from lev.plumbing.deps import Deps
from lev.store import imports as import_store
from lev.store import sourcefiles as source_store
from lev.store import uploads as upload_store

COPY_CHUNK = 1 << 20


def limits(deps: Deps) -> Limits:
    s = deps.settings
    return Limits(max_files=s.import_archive_max_files, max_unpacked=s.import_archive_max_unpacked,
                  max_bytes=s.import_archive_max_bytes, max_file=MAX_UPLOAD_BYTES)


async def record_archive(deps: Deps, principal: Principal, data: IO[bytes], filename: str | None,
                         root: str | None) -> uuid.UUID:
    """Read the ZIP in `data` (a file positioned anywhere), keep it in the object store, create its folders and
    record its files as the entries of a new import; the refusals are `lev.imports.archive`'s (nothing stored)."""
    cap = deps.settings.import_archive_max_bytes
    local = _temp("lev-import-")
    try:
        size = await asyncio.to_thread(_spool, data, local, cap)
        if size > cap:
            raise file_too_large(f"A ZIP to import is limited to {cap} bytes ({cap // (1 << 20)} MiB, "
                                 "LEV_IMPORT_ARCHIVE_MAX_BYTES).", cap)
        try:
            end = await asyncio.to_thread(check_end, str(local), limits(deps))
            # a small directory is read on a thread at once; a large one (or a lying end record) in a child process
            work = size if end is None else end.directory_bytes
            listing: Listing = await offload.run(read_listing, str(local), size, filename, root, limits(deps),
                                                 size=work)
        except offload.OffloadFailed:
            raise extraction_failed("The ZIP archive could not be read (its reader stopped).") from None
        except Refused as refused:
            raise ApiError(refused.code, refused.message, **refused.extra) from None
        path = deps.objects.new_path(str(principal.user_id), "archive.zip") if listing.members else None
        if path is not None:
            await deps.objects.put_file(path, local, "application/zip")
        try:
            async with deps.db.transaction() as s:
                ids, created = await import_store.ensure_folders(s, principal.user_id, listing.folders)
                entries: list[dict[str, Any]] = [{
                    "line": m.line, "url": None, "text": None, "kind": "file", "title": m.name, "metadata": {},
                    "folder_ids": [ids[m.folder.lower()]] if m.folder else [], "in_kb": True, "archived": False,
                    "outputs": [], "status": "pending", "existing": False, "path": m.path, "member": m.member,
                    "mime": m.mime} for m in listing.members]
                return await import_store.create_import(
                    s, user_id=principal.user_id, token_id=principal.token_id, fmt="zip",
                    filename=(filename or "")[:300] or None, size_bytes=size,
                    folder_ids=list(dict.fromkeys(ids.values())), folders_created=created, skipped=listing.skipped,
                    skipped_total=listing.skipped_total, entries=entries, object_path=path)
        except BaseException:
            if path is not None:
                async with deps.db.transaction() as s:
                    await upload_store.queue_deletion(s, [path])
            raise
    finally:
        await asyncio.to_thread(local.unlink, True)


def _temp(prefix: str) -> Path:
    fd, name = tempfile.mkstemp(prefix=prefix)
    os.close(fd)
    return Path(name)


def _spool(data: IO[bytes], local: Path, cap: int) -> int:
    """Copy the upload to `local`, at most `cap` + 1 bytes; returns the bytes copied."""
    data.seek(0)
    copied = 0
    with local.open("wb") as out:
        while copied <= cap:
            chunk = data.read(min(COPY_CHUNK, cap + 1 - copied))
            if not chunk:
                break
            out.write(chunk)
            copied += len(chunk)
    return copied


@asynccontextmanager
async def opened(deps: Deps, row: dict[str, Any]) -> AsyncIterator[zipfile.ZipFile | None]:
    """The import's archive, open for one slice of the job (None for an import of links, or when it is gone)."""
    if not row.get("object_path"):
        yield None
        return
    try:
        local = await deps.objects.local_copy(row["object_path"])
    except FileNotFoundError:
        yield None
        return
    try:
        zf = await asyncio.to_thread(zipfile.ZipFile, local)
        try:
            yield zf
        finally:
            zf.close()
    finally:
        await asyncio.to_thread(local.unlink, True)


class MemberUnreadable(Exception):
    """A file of the archive could not be read from it (corrupt, truncated, larger than it says)."""


def _extract(zf: zipfile.ZipFile, line: int, member: str, target: Path) -> tuple[str, int]:
    """Copy one member to `target` with a hard bound; its SHA-256 and size."""
    infos = zf.infolist()
    info = infos[line - 1] if 0 < line <= len(infos) else None
    if info is None or info.filename != member:
        raise MemberUnreadable("the archive no longer holds it")
    bound = min(info.file_size, MAX_UPLOAD_BYTES)
    digest = hashlib.sha256()
    size = 0
    try:
        with zf.open(info) as src, target.open("wb") as out:
            while chunk := src.read(COPY_CHUNK):
                size += len(chunk)
                if size > bound:
                    raise MemberUnreadable(f"it holds more than the {bound} bytes its entry declares")
                digest.update(chunk)
                out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError) as exc:
        raise MemberUnreadable(f"it is corrupt or truncated ({exc})") from None
    return digest.hexdigest(), size


async def import_file(deps: Deps, principal: Principal, started: datetime, entry: dict[str, Any],
                      zf: zipfile.ZipFile | None) -> None:
    """One file of the archive through the way every upload goes in; its entry done (added, updated or unchanged)
    or failed saying why."""
    if zf is None:
        await _fail(deps, entry, "the archive is no longer stored")
        return
    local = _temp("lev-member-")
    try:
        try:
            sha, size = await asyncio.to_thread(_extract, zf, entry["line"], entry["member"], local)
        except MemberUnreadable as exc:
            await _fail(deps, entry, f"the file cannot be read from the archive: {exc}")
            return
        async with deps.db.read_session() as s:
            kept = await source_store.get(s, principal.user_id, entry["path"])
        if kept is not None and kept["sha256"] == sha:  # as it is (or kept by an earlier run of this entry)
            await _finish(deps, entry, kept["item_id"], _change_since(kept, started))
            return
        path = deps.objects.new_path(str(principal.user_id), entry["title"] or "file")
        await deps.objects.put_file(path, local, entry["mime"])
        async with deps.db.transaction() as s:
            await upload_store.create_upload(s, path=path, user_id=principal.user_id, mime=entry["mime"], size=size,
                                             filename=(entry["title"] or "file")[:255], created_at=clock.now())
        source = Source(filename=entry["title"] or "file", path=path, mime=entry["mime"], size=size)
        try:
            stored = await keep_upload(deps, principal, source, title=None, in_kb=entry["in_kb"],
                                       auto_transform=False, at=entry["path"], sha256=sha)
        except ApiError as exc:
            await _fail(deps, entry, exc.message or exc.code)
            return
        await _finish(deps, entry, stored.item_id, stored.change or "added", list(stored.lost))
    finally:
        await asyncio.to_thread(local.unlink, True)


def _change_since(kept: dict[str, Any], started: datetime) -> str:
    """What an unchanged path's item says of this import: made or updated by it (an earlier run of the entry that
    stopped before its entry was marked), else unchanged."""
    if kept["updated_at"] < started:
        return "unchanged"
    return "added" if kept["item_created_at"] >= started else "updated"


async def _finish(deps: Deps, entry: dict[str, Any], item_id: uuid.UUID, change: str,
                  lost: list[dict[str, Any]] | None = None) -> None:
    shown = [{"text": h["text"], "note": h["note"]} for h in lost or []]
    async with deps.db.transaction() as s:
        await import_store.finish_entry(s, entry, item_id, ours=False, existing=change == "unchanged",
                                        change=change, lost=shown)


async def _fail(deps: Deps, entry: dict[str, Any], reason: str) -> None:
    async with deps.db.transaction() as s:
        await import_store.fail_entry(s, entry, reason)

