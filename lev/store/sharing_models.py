"""The tables of shared folders (issue 41): a folder's members, the invitations sent by email and the mailed links
that verify an account's address (what lets it see invitations without their links), a folder's public page. They
live on `models.metadata` beside the other tables (the migrations 0017 and 0022 own their DDL)."""

from __future__ import annotations

from sqlalchemy import Column, DateTime, ForeignKey, LargeBinary, Table, Text
from sqlalchemy.dialects.postgresql import UUID

from lev.store.models import metadata

folder_members = Table(
    "folder_members", metadata,
    Column("folder_id", UUID(as_uuid=True), ForeignKey("folders.id"), primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), primary_key=True),
    Column("role", Text, nullable=False),  # editor or viewer (the owner is folders.user_id)
    Column("added_at", DateTime(timezone=True)),
)

folder_invitations = Table(
    "folder_invitations", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("folder_id", UUID(as_uuid=True), ForeignKey("folders.id"), nullable=False),
    Column("email", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("invited_by", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("status", Text, nullable=False),  # pending, accepted, declined
    Column("created_at", DateTime(timezone=True)),
    Column("responded_at", DateTime(timezone=True)),
    Column("code_digest", LargeBinary),  # SHA-256 of the secret link that accepts it (while pending)
    Column("code_expires_at", DateTime(timezone=True)),
)

folder_publications = Table(
    "folder_publications", metadata,
    Column("folder_id", UUID(as_uuid=True), ForeignKey("folders.id"), primary_key=True),
    Column("slug", Text, nullable=False),
    Column("created_at", DateTime(timezone=True)),
)

email_verifications = Table(  # a verification mail's secret link (its digest), sent to the account's address
    "email_verifications", metadata,
    Column("code_digest", LargeBinary, primary_key=True),
    Column("user_id", UUID(as_uuid=True), ForeignKey("users.id"), nullable=False),
    Column("email", Text, nullable=False),
    Column("created_at", DateTime(timezone=True)),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)
