"""Remember which token created a user item, so a folder-scoped token can see and file the unfiled items it
made itself (a multi-folder token's new items are unfiled until placed).

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.execute("ALTER TABLE user_items ADD COLUMN IF NOT EXISTS created_by_token uuid "
               "REFERENCES tokens(id) ON DELETE SET NULL")


def downgrade() -> None:
    op.execute("ALTER TABLE user_items DROP COLUMN IF EXISTS created_by_token")
