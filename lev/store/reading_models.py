"""The tables of tags and reading (issue 50): one user's tags and which items carry them, and the archived copies
of pages. They live on `models.metadata` beside the other tables (migrations 0027 and 0028 own their DDL); an item's
own reading state (`read_at`, `progress`) and tag keys (`tag_keys`) are columns of `user_items`."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, ForeignKey, Integer, LargeBinary, Table, Text
from sqlalchemy.dialects.postgresql import JSONB, UUID

from lev.store.models import metadata

tags = Table(  # one user's tag names (issue 50): unique per user by `key`, the name case-folded
    "tags", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("key", Text(collation="C"), nullable=False),
    Column("created_at", DateTime(timezone=True)),
)

item_tags = Table(
    "item_tags", metadata,
    Column("item_id", UUID(as_uuid=True), ForeignKey("user_items.id"), primary_key=True),
    Column("tag_id", UUID(as_uuid=True), ForeignKey("tags.id"), primary_key=True),
    Column("created_at", DateTime(timezone=True)),
)

archives = Table(  # a content's archived copy (migration 0028): the page's HTML until the snapshot is made
    "archives", metadata,
    Column("content_id", UUID(as_uuid=True), ForeignKey("contents.id"), primary_key=True),
    Column("status", Text, nullable=False),  # pending, ready, failed
    Column("url", Text, nullable=False),
    Column("source", LargeBinary),
    Column("charset", Text),
    Column("object_path", Text),
    Column("size_bytes", BigInteger),
    Column("resources", Integer, nullable=False),
    Column("skipped", JSONB, nullable=False),
    Column("error", Text),
    Column("created_at", DateTime(timezone=True)),
    Column("saved_at", DateTime(timezone=True)),
)
