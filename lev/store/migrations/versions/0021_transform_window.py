"""A transform that ran is recorded on its item (`user_items.transformed_at`), outputs or none: the reconciler
(`store.contents.untransformed`, every minute) queues again only the transforms of the last day that never ran
(lost with Redis's data), reading them through a small partial index instead of every item. Items that have
outputs, or were saved over a day ago, count as transformed.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

revision = "0021"
down_revision = "0020"


def upgrade() -> None:
    op.execute("""
        ALTER TABLE user_items ADD COLUMN IF NOT EXISTS transformed_at timestamptz;
        UPDATE user_items u SET transformed_at = coalesce(u.updated_at, u.created_at, now())
         WHERE u.auto_transform AND u.transformed_at IS NULL
           AND (u.created_at < now() - interval '1 day' OR EXISTS (SELECT 1 FROM outputs o WHERE o.item_id = u.id));
        DROP INDEX IF EXISTS user_items_transform_window;
        CREATE INDEX IF NOT EXISTS user_items_transform_due ON user_items (created_at)
            WHERE auto_transform AND transformed_at IS NULL;
    """)
