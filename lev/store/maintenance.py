"""Whole-database questions for backups and restores: row counts, emptiness, a clean schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from lev.store.db import Database
from lev.store.models import metadata
from lev.store.reading_models import archives  # noqa: F401 (the tables counted must be on `metadata`)

COUNTED = ("users", "folders", "contents", "user_items", "item_folders", "chunks", "outputs", "tokens",
           "token_folders", "activity", "uploads", "usage_monthly", "tags", "item_tags", "archives")


async def _counts(conn: AsyncConnection) -> dict[str, int]:
    present = set((await conn.execute(text(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"))).scalars())
    names = [t for t in COUNTED if t in metadata.tables and t in present]  # an older release's has fewer
    return {t: int((await conn.execute(text(f'SELECT count(*) FROM "{t}"'))).scalar_one()) for t in names}


async def table_counts(db: Database) -> dict[str, int]:
    """Rows per table of the library (what a restore must reproduce)."""
    async with db.engine.connect() as conn:
        return await _counts(conn)


@dataclass
class Snapshot:
    """One frozen view of the database: its id (for `pg_dump --snapshot`) and what it holds."""

    id: str
    revision: str | None
    counts: dict[str, int] = field(default_factory=dict)
    object_paths: list[str] = field(default_factory=list)
    archives: dict[str, int] = field(default_factory=dict)  # the archived copies: how many, their bytes


@asynccontextmanager
async def exported_snapshot(db: Database) -> AsyncIterator[Snapshot]:
    """Hold a repeatable-read transaction open and export its snapshot, so a dump taken with it sees exactly the
    counts and object paths reported here."""
    async with db.engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="REPEATABLE READ")
        async with conn.begin():
            snap_id = (await conn.execute(text("SELECT pg_export_snapshot()"))).scalar_one()
            revision = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
            # a directory of an older release (backed up before `lev db upgrade` migrates it) has no archives yet
            archives = (await conn.execute(text("SELECT to_regclass('archives') IS NOT NULL"))).scalar_one()
            paths = (await conn.execute(text(
                "SELECT DISTINCT object_path FROM contents WHERE object_path IS NOT NULL"
                + (" UNION SELECT object_path FROM archives WHERE object_path IS NOT NULL" if archives else "")
            ))).scalars()
            archived = (await conn.execute(text(
                "SELECT count(*), coalesce(sum(size_bytes), 0) FROM archives WHERE status = 'ready'"))).one() \
                if archives else (0, 0)
            yield Snapshot(snap_id, revision, await _counts(conn), sorted(paths),
                           {"count": int(archived[0]), "bytes": int(archived[1])})


async def holds_data(db: Database) -> bool:
    """True when the database has any user (a restore must not overwrite a live library)."""
    async with db.engine.connect() as conn:
        exists = (await conn.execute(text("SELECT to_regclass('public.users') IS NOT NULL"))).scalar_one()
        if not exists:
            return False
        return bool((await conn.execute(text("SELECT EXISTS (SELECT 1 FROM users)"))).scalar_one())


async def reset_schema(db: Database) -> None:
    """Drop everything in the public schema (an empty or freshly migrated database) before a restore."""
    async with db.engine.begin() as conn:
        await conn.execute(text("DROP SCHEMA public CASCADE"))
        await conn.execute(text("CREATE SCHEMA public"))
        await conn.execute(text("DROP EXTENSION IF EXISTS vector CASCADE"))
