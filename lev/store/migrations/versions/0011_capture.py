"""Pages captured in a user's browser (issue 34): such a content belongs to that user alone (`owner_id`) and is
found again by its canonical URL (`owner_url`) for that user only, never through the shared `canonical_url`.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.execute("""
        ALTER TABLE contents ADD COLUMN IF NOT EXISTS owner_id uuid REFERENCES users(id) ON DELETE CASCADE;
        ALTER TABLE contents ADD COLUMN IF NOT EXISTS owner_url text;
        ALTER TABLE contents DROP CONSTRAINT IF EXISTS contents_owner_url_check;
        ALTER TABLE contents ADD CONSTRAINT contents_owner_url_check
            CHECK ((owner_id IS NULL) = (owner_url IS NULL) AND (owner_id IS NULL OR canonical_url IS NULL));
        CREATE INDEX IF NOT EXISTS contents_owner_url ON contents (owner_id, owner_url)
            WHERE owner_id IS NOT NULL;
    """)


def downgrade() -> None:
    op.execute("""
        DROP INDEX IF EXISTS contents_owner_url;
        ALTER TABLE contents DROP CONSTRAINT IF EXISTS contents_owner_url_check;
        ALTER TABLE contents DROP COLUMN IF EXISTS owner_url;
        ALTER TABLE contents DROP COLUMN IF EXISTS owner_id;
    """)
