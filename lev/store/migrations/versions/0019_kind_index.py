"""The `kind` filter read through an index: a search narrowed to kinds finds the visible contents of those kinds
(`lev.store.search`'s keyword candidates of a small scope) from the user's items of those kinds only, not by
reading every item of the user.

Revision ID: 0019
Revises: 0015b
"""

from alembic import op

revision = "0019"
down_revision = "0015b"


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS user_items_user_kind ON user_items (user_id, kind)")
