"""Chunk embeddings stored inline in the heap row (STORAGE PLAIN) instead of pgvector's default EXTERNAL.

A 384-dimension vector is 1,544 bytes; with a chunk's text and tsvector the row passes PostgreSQL's 2 kB TOAST
threshold and the vector, the largest eligible value, went out of line: every distance computed from the heap
(exact scans of small scopes, the cosine of each candidate) fetched it from the TOAST table. The text and
tsvector (EXTENDED) are compressed or moved out instead; they are read only for the returned hits. Rows written
before this migration keep their layout until rewritten (docs/decisions.md, issue 18).

Revision ID: 0009
Revises: 0008
"""

from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE PLAIN")


def downgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE EXTERNAL")
