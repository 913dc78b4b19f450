"""Feeds remember the SHA-256 of the body of their last 200 answer (issue 40): a feed whose server sends no
validators, or answers 200 with the same document, is recognised as unchanged without being parsed.

Revision ID: 0016
Revises: 0017
"""

from alembic import op

revision = "0016"
down_revision = "0017"


def upgrade() -> None:
    op.execute("ALTER TABLE feeds ADD COLUMN IF NOT EXISTS body_sha256 bytea")


def downgrade() -> None:
    op.execute("ALTER TABLE feeds DROP COLUMN IF EXISTS body_sha256")
