"""A second index on the BM25 postings, by term and content: a small scope's keyword candidates read the postings
of its own contents for a common term instead of the term's whole posting list across every user.

Built CONCURRENTLY, so writes go on during an upgrade; the primary key (term, chunk) stays for the per-candidate
probes, so the previous release's statements keep their plans (docs/decisions.md, issue 18).

Revision ID: 0010
Revises: 0009
"""

from alembic import op
from sqlalchemy import text

revision = "0010"
down_revision = "0009"

INDEX = "lev_postings_content"


def upgrade() -> None:
    with op.get_context().autocommit_block():
        bind = op.get_bind()
        invalid = bind.execute(text(
            "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE c.relname = :n AND NOT i.indisvalid"), {"n": INDEX}).first()
        if invalid:  # an earlier concurrent build that was interrupted
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
        op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX}"
                   " ON lev_postings (lexeme, content_id) INCLUDE (chunk_id, tf, dl)")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
