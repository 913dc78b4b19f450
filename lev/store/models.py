"""SQLAlchemy Core tables mirroring the Alembic schema (migrations own the DDL)."""

from __future__ import annotations

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    Column,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR, UUID

from lev.store.vectors import Embedding

EMBEDDING_DIM = 384  # chunks.embedding is vector(384) (migration 0001): every embedder must return this size

metadata = MetaData()

users = Table(
    "users", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("email", Text, nullable=False),
    Column("password_hash", Text),
    Column("tier", Text, nullable=False),
    Column("created_at", DateTime(timezone=True)),
    Column("email_verified_at", DateTime(timezone=True)),  # null: the address is not known to be the account's
)

folders = Table(
    "folders", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("created_at", DateTime(timezone=True)),
)

contents = Table(
    "contents", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("kind", Text, nullable=False),
    Column("canonical_url", Text),
    Column("url", Text),
    Column("title", Text),
    Column("text", Text),
    Column("metadata", JSONB, nullable=False),
    Column("mime", Text),
    Column("object_path", Text),
    Column("size_bytes", BigInteger),
    Column("duration_sec", Float),
    Column("transcript", Text),
    Column("status", Text, nullable=False),
    Column("error", Text),
    Column("created_at", DateTime(timezone=True)),
    Column("owner_id", UUID(as_uuid=True), ForeignKey("users.id")),  # a page captured in this user's browser
    Column("owner_url", Text),  # ... and its canonical URL (never shared: canonical_url stays NULL)
    Column("outline", JSONB),  # headings and PDF page starts in `text` (store.locations.Outline)
)

user_items = Table(
    "user_items", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("content_id", UUID(as_uuid=True), ForeignKey("contents.id"), nullable=False),
    Column("kind", Text, nullable=False),
    Column("title", Text),
    Column("url", Text),
    Column("in_kb", Boolean, nullable=False),
    Column("archived", Boolean, nullable=False),
    Column("status", Text, nullable=False),
    Column("transcription_status", Text, nullable=False),
    Column("error", Text),
    Column("auto_transform", Boolean, nullable=False),
    Column("created_by_token", UUID(as_uuid=True)),
    Column("metadata", JSONB, nullable=False),  # the user's own (an import's tags), over the content's
    Column("created_at", DateTime(timezone=True)),
    Column("updated_at", DateTime(timezone=True)),
    Column("transformed_at", DateTime(timezone=True)),  # its transform ran (outputs or none): not re-queued
    # The URL's host reversed, in byte order (the `site` filter, `store.filters`): computed by PostgreSQL.
    Column("url_rhost", Text(collation="C"), Computed("reverse(lev_url_host(url))", persisted=True)),
    Column("tag_keys", ARRAY(Text(collation="C")), nullable=False, server_default="{}"),  # store.tags: the tag filter
    Column("read_at", DateTime(timezone=True)), Column("progress", Float, nullable=False, server_default="0"),  # 0027
)

item_folders = Table(
    "item_folders", metadata,
    Column("item_id", UUID(as_uuid=True), ForeignKey("user_items.id"), primary_key=True),
    Column("folder_id", UUID(as_uuid=True), ForeignKey("folders.id"), primary_key=True),
    Column("created_at", DateTime(timezone=True)),
)

chunks = Table(
    "chunks", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("content_id", UUID(as_uuid=True), ForeignKey("contents.id"), nullable=False),
    Column("ord", Integer, nullable=False),
    Column("title", Text),
    Column("text", Text, nullable=False),
    Column("embedding", Embedding(EMBEDDING_DIM), nullable=False),
    Column("tsv", TSVECTOR),
    Column("start_sec", Float),  # transcript chunks: where in the recording the chunk is spoken
    Column("end_sec", Float),
)

chunk_locations = Table(  # where a chunk stands in its content's text (or transcript): store.locations
    "chunk_locations", metadata,
    Column("chunk_id", UUID(as_uuid=True), ForeignKey("chunks.id"), primary_key=True),
    Column("char_start", Integer),
    Column("char_end", Integer),
    Column("page", Integer),
    Column("page_end", Integer),
    Column("heading", Text),
    Column("slide", Integer),  # a presentation's passage: the slide it starts on
    Column("sheet", Text),  # a spreadsheet's passage: its sheet and the rows it spans
    Column("row_start", Integer),
    Column("row_end", Integer),
)

outputs = Table(
    "outputs", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("item_id", UUID(as_uuid=True), ForeignKey("user_items.id"), nullable=False),
    Column("kind", Text, nullable=False),
    Column("content", JSONB, nullable=False),
    Column("generator", Text, nullable=False),
    Column("created_at", DateTime(timezone=True)),
)

tokens = Table(
    "tokens", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("token_hash", LargeBinary, nullable=False),
    Column("prefix", Text, nullable=False),
    Column("capabilities", ARRAY(Text), nullable=False),
    Column("is_unscoped", Boolean, nullable=False),
    Column("kb_only", Boolean, nullable=False),
    Column("write_cap", Integer, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True)),
    Column("last_used_at", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True)),
    Column("kind", Text, nullable=False),  # 'token' (minted by hand) or 'oauth' (a grant to an OAuth client)
    Column("client_id", Text),
    Column("resource", Text),  # RFC 8707 audience of an OAuth grant; NULL: every surface
    Column("access_expires_at", DateTime(timezone=True)),  # an OAuth grant's current access token
)

token_folders = Table(
    "token_folders", metadata,
    Column("token_id", UUID(as_uuid=True), ForeignKey("tokens.id"), primary_key=True),
    Column("folder_id", UUID(as_uuid=True), ForeignKey("folders.id"), primary_key=True),
)

activity = Table(
    "activity", metadata,
    Column("id", BigInteger, primary_key=True),
    Column("ts", DateTime(timezone=True), nullable=False),
    Column("user_id", UUID(as_uuid=True)),
    Column("token_id", UUID(as_uuid=True)),
    Column("surface", Text, nullable=False),
    Column("method", Text, nullable=False),
    Column("status", Integer, nullable=False),
    Column("ip", Text),
    Column("user_agent", Text),
    Column("result_count", Integer),
    Column("latency_ms", Float, nullable=False),
    Column("query", Text),
    Column("request_id", Text),
)

object_deletions = Table(
    "object_deletions", metadata,
    Column("path", Text, primary_key=True),
    Column("attempts", Integer, nullable=False),
    Column("last_error", Text),
    Column("queued_at", DateTime(timezone=True)),
)

uploads = Table(
    "uploads", metadata,
    Column("path", Text, primary_key=True),
    Column("user_id", UUID(as_uuid=True), nullable=False),
    Column("mime", Text, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("filename", Text, nullable=False),
    Column("item_id", UUID(as_uuid=True)),
    Column("created_at", DateTime(timezone=True)),
)

token_monthly_writes = Table(
    "token_monthly_writes", metadata,
    Column("token_id", UUID(as_uuid=True), ForeignKey("tokens.id"), primary_key=True),
    Column("month", Text, primary_key=True),
    Column("writes", Integer, nullable=False),
)

usage_monthly = Table(
    "usage_monthly", metadata,
    Column("user_id", UUID(as_uuid=True), primary_key=True),
    Column("month", Text, primary_key=True),
    Column("transcription_seconds", Float, nullable=False),
)

sessions = Table(
    "sessions", metadata,
    Column("id_hash", LargeBinary, primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("csrf_token", Text, nullable=False),
    Column("created_at", DateTime(timezone=True)),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

oauth_clients = Table(
    "oauth_clients", metadata,
    Column("client_id", Text, primary_key=True),
    Column("kind", Text, nullable=False),  # 'dcr' (RFC 7591) or 'cimd' (a client ID metadata document)
    Column("client_name", Text),
    Column("client_uri", Text),
    Column("redirect_uris", ARRAY(Text), nullable=False),
    Column("auth_method", Text, nullable=False),
    Column("secret_hash", LargeBinary),
    Column("metadata", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True)),
    Column("stale_at", DateTime(timezone=True)),  # a cached metadata document is fetched again after this
)

oauth_codes = Table(
    "oauth_codes", metadata,
    Column("code_hash", LargeBinary, primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("client_id", Text, nullable=False),
    Column("redirect_uri", Text, nullable=False),
    Column("code_challenge", Text, nullable=False),
    Column("resource", Text, nullable=False),
    Column("choice", JSONB, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True)),
    Column("token_id", UUID(as_uuid=True), ForeignKey("tokens.id")),
    Column("created_at", DateTime(timezone=True)),
)

oauth_refresh_tokens = Table(
    "oauth_refresh_tokens", metadata,
    Column("token_hash", LargeBinary, primary_key=True),
    Column("token_id", UUID(as_uuid=True), ForeignKey("tokens.id"), nullable=False),
    Column("created_at", DateTime(timezone=True)),
    Column("rotated_at", DateTime(timezone=True)),
)

feeds = Table(
    "feeds", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("folder_id", UUID(as_uuid=True), ForeignKey("folders.id")),
    Column("url", Text, nullable=False),
    Column("site_url", Text),
    Column("title", Text),  # the user's own title; the feed's is feed_title
    Column("feed_title", Text),
    Column("paused", Boolean, nullable=False),
    Column("failures", Integer, nullable=False),  # checks failed in a row
    Column("etag", Text),
    Column("last_modified", Text),
    Column("last_checked_at", DateTime(timezone=True)),
    Column("last_success_at", DateTime(timezone=True)),
    Column("last_error", Text),
    Column("next_poll_at", DateTime(timezone=True), nullable=False),
    Column("entries_ingested", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True)),
    Column("body_sha256", LargeBinary),  # of the last 200 answer: the same body again is not parsed
    Column("entries_found", Integer, nullable=False, server_default="0"),  # entries recorded for it
)

feed_entries = Table(
    "feed_entries", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("feed_id", UUID(as_uuid=True), ForeignKey("feeds.id"), nullable=False),
    Column("guid_key", LargeBinary, nullable=False),  # SHA-256 of the entry's guid (its link when it has none)
    Column("url_key", LargeBinary),  # SHA-256 of the canonical URL ingested
    Column("url", Text),
    Column("title", Text),
    Column("published_at", DateTime(timezone=True)),
    Column("status", Text, nullable=False),  # pending, done, failed, skipped
    Column("item_id", UUID(as_uuid=True)),
    Column("error", Text),
    Column("created_at", DateTime(timezone=True)),
    Column("content", Text),  # the entry's own text as HTML, while it waits for its item (migration 0029)
)

webhooks = Table(
    "webhooks", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("url", Text, nullable=False),
    Column("description", Text),
    Column("events", ARRAY(Text), nullable=False),
    Column("secret", Text, nullable=False),  # whsec_…: readable to sign, so kept only here
    Column("previous_secret", Text),  # still signed with for a day after a rotation
    Column("previous_secret_until", DateTime(timezone=True)),
    Column("enabled", Boolean, nullable=False),
    Column("disabled_reason", Text),
    Column("failing_since", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True)),
    Column("updated_at", DateTime(timezone=True)),
)

webhook_events = Table(
    "webhook_events", metadata,
    Column("id", Text, primary_key=True),  # msg_…, the webhook-id header
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("type", Text, nullable=False),
    Column("payload", JSONB, nullable=False),  # the body: {type, timestamp, data}
    Column("created_at", DateTime(timezone=True)),
)

webhook_deliveries = Table(
    "webhook_deliveries", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("webhook_id", UUID(as_uuid=True), ForeignKey("webhooks.id"), nullable=False),
    Column("event_id", Text, ForeignKey("webhook_events.id"), nullable=False),
    Column("status", Text, nullable=False),  # pending, succeeded, failed
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False),
    Column("locked_until", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True)),
)

webhook_attempts = Table(
    "webhook_attempts", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("delivery_id", UUID(as_uuid=True), ForeignKey("webhook_deliveries.id"), nullable=False),
    Column("webhook_id", UUID(as_uuid=True), ForeignKey("webhooks.id"), nullable=False),
    Column("event_id", Text, nullable=False),
    Column("event_type", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", Text, nullable=False),  # succeeded, retrying, failed
    Column("status_code", Integer),
    Column("error", Text),
    Column("response", Text),  # at most 1 KB of the receiver's answer
    Column("duration_ms", Integer, nullable=False),
    Column("next_attempt_at", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True)),
)

highlights = Table(
    "highlights", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),  # whose: theirs alone
    Column("item_id", UUID(as_uuid=True), ForeignKey("user_items.id"), nullable=False),
    Column("text", Text, nullable=False),  # always the item's text[char_start:char_end]
    Column("note", Text),
    Column("char_start", Integer, nullable=False),
    Column("char_end", Integer, nullable=False),
    Column("embedding", Embedding(EMBEDDING_DIM)),  # of the passage and its note, for search
    Column("tsv", TSVECTOR),  # generated: the passage (weight A) and the note (B)
    Column("created_at", DateTime(timezone=True)),
    Column("updated_at", DateTime(timezone=True)),
)
