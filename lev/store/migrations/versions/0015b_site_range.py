"""The `site` filter as one index range: the host of an item's URL reversed, in byte order (a site and its
subdomains are the reversed site and what starts with it and a dot), instead of 0015's index on the host itself
(an equality only, so the subdomains were a scan).

Revision ID: 0015b
Revises: 0015
"""

from alembic import op

revision = "0015b"
down_revision = "0015"


def upgrade() -> None:
    op.execute("""
        DROP INDEX IF EXISTS user_items_host;
        CREATE INDEX IF NOT EXISTS user_items_rhost ON user_items (user_id, (reverse(lev_url_host(url)) COLLATE "C"));
    """)
