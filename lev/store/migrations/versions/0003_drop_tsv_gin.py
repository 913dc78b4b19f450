"""Drop the GIN index on chunks.tsv: keyword search reads the BM25 postings table (0002), never `tsv @@ query`,
so the index only cost ingest time and disk.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS chunks_tsv_gin")
