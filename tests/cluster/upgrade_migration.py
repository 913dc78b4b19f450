"""TEST ONLY: the schema change of a pretend next release. tests/cluster/test_cluster.py copies it into a copy of
the source tree, after that tree's head revision, and runs the cluster's upgrade from the copy; it is never part
of Lev's migration chain (store/migrations/versions).

The shape of a change made under load that the previous release keeps working with: a column with a constant
default (no table rewrite; the previous release's inserts get the default), a backfill of the existing rows, and
an index built without blocking writes.

Revision ID: 9001
"""

from alembic import op

revision = "9001"
down_revision = None  # replaced by the head revision of the tree it is copied into


def upgrade() -> None:
    op.execute("ALTER TABLE user_items ADD COLUMN upgrade_probe text NOT NULL DEFAULT 'new'")
    op.execute("UPDATE user_items SET upgrade_probe = kind")
    with op.get_context().autocommit_block():
        op.execute("CREATE INDEX CONCURRENTLY user_items_upgrade_probe ON user_items (upgrade_probe)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS user_items_upgrade_probe")
    op.execute("ALTER TABLE user_items DROP COLUMN IF EXISTS upgrade_probe")
