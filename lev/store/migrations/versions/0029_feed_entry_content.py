"""A feed entry's own text (its content, else its summary, as HTML), kept while the entry waits for its item: the
item is made from it when the entry's page has no readable text.

Revision ID: 0029
Revises: 0028
"""

from alembic import op

revision = "0029"
down_revision = "0028"


def upgrade() -> None:
    op.execute("ALTER TABLE feed_entries ADD COLUMN IF NOT EXISTS content text")


def downgrade() -> None:
    op.execute("ALTER TABLE feed_entries DROP COLUMN IF EXISTS content")
