"""The reconciler's search for transforms lost with Redis (`store.contents.untransformed`, every minute) reads the
items of the last day that asked for one through an index, instead of reading every item.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

revision = "0021"
down_revision = "0020"


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS user_items_transform_window ON user_items (created_at) WHERE auto_transform")
