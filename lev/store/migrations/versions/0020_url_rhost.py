"""The `site` filter without parsing URLs at search time: each item keeps its URL's host reversed (`url_rhost`, the
0015b index's expression, computed by PostgreSQL when the URL is written), and the index reads that column. A
narrowed vector search checks the filter once per row its index scan returns; the stored host makes that check a
comparison instead of a regular expression (issue 39: about 9 µs less per row).

Revision ID: 0020
Revises: 0019
"""

from alembic import op

revision = "0020"
down_revision = "0019"


def upgrade() -> None:
    op.execute("""
        ALTER TABLE user_items ADD COLUMN IF NOT EXISTS url_rhost text COLLATE "C"
            GENERATED ALWAYS AS (reverse(lev_url_host(url))) STORED;
        CREATE INDEX IF NOT EXISTS user_items_url_rhost ON user_items (user_id, url_rhost);
        DROP INDEX IF EXISTS user_items_rhost;
    """)
