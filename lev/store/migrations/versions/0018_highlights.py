"""Highlights (issue 42): a passage of an item's text a user marked, with an optional note. The passage is kept as
its offsets into the item's text and the text itself (always that slice); `tsv` and `embedding` (of the passage
and its note) let search find it. A highlight is its user's alone, whoever owns the item (a shared folder's).

Revision ID: 0018
Revises: 0013
"""

from alembic import op

revision = "0018"
down_revision = "0013"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE IF NOT EXISTS highlights (
            id uuid PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            item_id uuid NOT NULL REFERENCES user_items(id) ON DELETE CASCADE,
            text text NOT NULL,
            note text,
            char_start integer NOT NULL CHECK (char_start >= 0),
            char_end integer NOT NULL,
            embedding vector(384),
            tsv tsvector GENERATED ALWAYS AS (
                setweight(to_tsvector('english', text), 'A') ||
                setweight(to_tsvector('english', coalesce(note, '')), 'B')
            ) STORED,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CHECK (char_end > char_start)
        );
        CREATE INDEX IF NOT EXISTS highlights_user_recent ON highlights (user_id, created_at DESC, id DESC);
        CREATE INDEX IF NOT EXISTS highlights_item ON highlights (item_id, user_id, char_start);
        CREATE INDEX IF NOT EXISTS highlights_tsv ON highlights USING gin (tsv);
    """)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS highlights;")
