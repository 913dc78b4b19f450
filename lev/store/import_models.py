"""The tables of imports: the import record and its entries (the database's record of acknowledged import work),
and the files Lev keeps by their path (a ZIP's members, `lev sync`'s files). They live on `models.metadata` beside
the other tables (the migrations 0008 and 0026 own their DDL)."""

from __future__ import annotations

from sqlalchemy import ARRAY, BigInteger, Boolean, Column, DateTime, ForeignKey, Integer, Table, Text
from sqlalchemy.dialects.postgresql import JSONB, UUID

from lev.store.models import metadata

imports = Table(
    "imports", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("token_id", UUID(as_uuid=True)),
    Column("format", Text, nullable=False),
    Column("filename", Text),
    Column("size_bytes", BigInteger, nullable=False),
    Column("status", Text, nullable=False),
    Column("folder_ids", ARRAY(UUID(as_uuid=True)), nullable=False),
    Column("folders_created", Integer, nullable=False),
    Column("skipped", JSONB, nullable=False),
    Column("slice", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True)),
    Column("object_path", Text),  # a ZIP's archive, kept in the object store until the import is done
    Column("skipped_total", Integer),  # everything skipped (`skipped` lists at most 1000); NULL before 0026
)

import_entries = Table(
    "import_entries", metadata,
    Column("import_id", UUID(as_uuid=True), ForeignKey("imports.id"), primary_key=True),
    Column("ord", Integer, primary_key=True),
    Column("line", Integer, nullable=False),
    Column("url", Text),
    Column("text", Text),
    Column("kind", Text),
    Column("title", Text),
    Column("metadata", JSONB, nullable=False),
    Column("folder_ids", ARRAY(UUID(as_uuid=True)), nullable=False),
    Column("in_kb", Boolean, nullable=False),
    Column("archived", Boolean, nullable=False),
    Column("outputs", JSONB, nullable=False),
    Column("status", Text, nullable=False),
    Column("existing", Boolean, nullable=False),
    Column("item_id", UUID(as_uuid=True)),
    Column("error", Text),
    Column("path", Text),  # a ZIP's file: its source path (source_files), the archive's `member`, its `mime`
    Column("member", Text),
    Column("mime", Text),
    Column("change", Text),  # added, updated, unchanged (NULL: a link, or not yet done)
    Column("lost", JSONB),  # an updated file's highlights whose words are gone: [{text, note}]
)

source_files = Table(  # a file Lev keeps by its path (a ZIP's member, a synced file): which item it made
    "source_files", metadata,
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), primary_key=True),
    Column("path", Text(collation="C"), primary_key=True),
    Column("item_id", UUID(as_uuid=True), ForeignKey("user_items.id"), nullable=False),
    Column("sha256", Text, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True)),
)
