"""`lev backup PATH` and `lev restore PATH`: a consistent database dump, the object store's files, a manifest.

Layout of a backup directory:

    manifest.json        format, time, code version, migration, table row counts, the archived copies (how many,
                         their bytes), every file with size and sha256
    database.dump        pg_dump custom format (one snapshot: the dump is consistent by itself)
    objects/uploads/...  every stored object, under its object-store path

The database is dumped first, the objects copied after; an object the dump refers to but the store no longer
holds (deleted in between) is listed under `missing_objects`. Redis is not backed up: it holds queued jobs and
rate-limit windows, which a restored service re-derives. Secrets stay out (the upload signing key, settings).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from lev import embedded
from lev.core import clock
from lev.core.packagedata import VERSION
from lev.store import maintenance
from lev.store.db import Database
from lev.store.objects import ObjectStore

FORMAT = 1
DUMP = "database.dump"
MANIFEST = "manifest.json"
OBJECTS = "objects"


class BackupError(RuntimeError):
    """A backup or restore that cannot proceed; the message says why and what to do."""


def pg_tool(name: str) -> str:
    """pg_dump / pg_restore: the newest PostgreSQL client tools the embedded package ships (they dump and restore
    every major it runs, and older ones), else the system's."""
    bundled = embedded.pg_bin(name)
    if bundled.exists():
        return str(bundled)
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} not found; install the PostgreSQL client tools")
    return found


def _pg_env(database_url: str) -> dict[str, str]:
    """libpq environment for the database (the password goes in PGPASSWORD, never on a command line)."""
    url = make_url(database_url)
    env = {**os.environ, "PGDATABASE": url.database or "postgres", "PGUSER": url.username or "postgres"}
    host = url.query.get("host") or url.host
    if isinstance(host, tuple):
        host = host[0]
    if host:
        env["PGHOST"] = str(host)
    if url.port:
        env["PGPORT"] = str(url.port)
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    return env


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run(cmd: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(f"{Path(cmd[0]).name} failed: {done.stderr.strip()[-2000:]}")


def _prepare(target: Path) -> None:
    if target.exists() and any(target.iterdir()):
        raise BackupError(f"{target} is not empty; give a new directory")
    target.mkdir(parents=True, exist_ok=True)


def _keep(local: Path, target: Path, path: str) -> dict[str, Any]:
    dest = target / OBJECTS / path
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(local), dest)
    return {"path": path, "bytes": dest.stat().st_size, "sha256": _sha256(dest)}


async def backup(db: Database, store: ObjectStore, target: Path, database_url: str) -> dict[str, Any]:
    """Write a backup into `target` (a new or empty directory); returns the manifest."""
    await asyncio.to_thread(_prepare, target)
    started = clock.now()
    dump = target / DUMP
    async with maintenance.exported_snapshot(db) as snap:
        await asyncio.to_thread(_run, [pg_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges",
                                       f"--snapshot={snap.id}", "--file", str(dump)], _pg_env(database_url))
    referenced = set(snap.object_paths)
    objects: list[dict[str, Any]] = []
    for path in await store.list_paths():
        try:
            local = await store.local_copy(path)
        except FileNotFoundError:
            continue  # deleted since it was listed
        objects.append(await asyncio.to_thread(_keep, local, target, path))
    stored = {o["path"] for o in objects}
    dump_entry = {"file": DUMP, "bytes": dump.stat().st_size, "sha256": await asyncio.to_thread(_sha256, dump)}
    manifest = {
        "format": FORMAT, "lev_version": VERSION, "created_at": started.isoformat(),
        "finished_at": clock.now().isoformat(), "migration": snap.revision, "counts": snap.counts,
        "database": dump_entry, "archives": snap.archives,
        "objects": objects, "missing_objects": sorted(referenced - stored),
    }
    await asyncio.to_thread((target / MANIFEST).write_text, json.dumps(manifest, indent=2))
    return manifest


def _check(source: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((source / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise BackupError(f"{source / MANIFEST} is missing or unreadable: {exc}") from None
    if manifest.get("format") != FORMAT:
        raise BackupError(f"unknown backup format {manifest.get('format')!r}")
    dump = source / DUMP
    if not dump.is_file() or _sha256(dump) != manifest["database"]["sha256"]:
        raise BackupError(f"{dump} is missing or does not match the manifest")
    for obj in manifest["objects"]:
        f = source / OBJECTS / obj["path"]
        if not f.is_file() or f.stat().st_size != obj["bytes"] or _sha256(f) != obj["sha256"]:
            raise BackupError(f"object {obj['path']} is missing or does not match the manifest")
    return manifest


async def restore(db: Database, store: ObjectStore, source: Path, database_url: str) -> dict[str, Any]:
    """Restore a backup into an empty (or freshly migrated, user-less) database and the configured object
    store; checks every checksum first and the row counts after. Returns the manifest."""
    manifest = await asyncio.to_thread(_check, source)
    if await maintenance.holds_data(db):
        raise BackupError("the target database already holds a library (it has users); restore into an empty "
                          "database or data dir")
    await maintenance.reset_schema(db)
    await asyncio.to_thread(_run, [pg_tool("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error",
                                   "--dbname", _pg_env(database_url)["PGDATABASE"], str(source / DUMP)],
                            _pg_env(database_url))
    for obj in manifest["objects"]:
        await store.put_file(obj["path"], source / OBJECTS / obj["path"])
    counts = await maintenance.table_counts(db)
    wrong = {t: (n, counts.get(t)) for t, n in manifest["counts"].items() if counts.get(t) != n}
    if wrong:
        raise BackupError(f"row counts differ after the restore (expected, got): {wrong}")
    return manifest
