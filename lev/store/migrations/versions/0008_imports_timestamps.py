"""Imports with their entries (the record of acknowledged import work), per-item metadata (an import's tags are
the user's, not the shared content's), and the start and end seconds of transcript chunks.

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    op.execute("""
        ALTER TABLE user_items ADD COLUMN IF NOT EXISTS metadata jsonb NOT NULL DEFAULT '{}'::jsonb;
        ALTER TABLE chunks ADD COLUMN IF NOT EXISTS start_sec double precision;
        ALTER TABLE chunks ADD COLUMN IF NOT EXISTS end_sec double precision;

        CREATE TABLE IF NOT EXISTS imports (
            id uuid PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            token_id uuid REFERENCES tokens(id) ON DELETE SET NULL,
            format text NOT NULL,
            filename text,
            size_bytes bigint NOT NULL,
            status text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done')),
            folder_ids uuid[] NOT NULL DEFAULT '{}',
            folders_created integer NOT NULL DEFAULT 0,
            skipped jsonb NOT NULL DEFAULT '[]'::jsonb,
            slice integer NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz
        );
        CREATE INDEX IF NOT EXISTS imports_user_created ON imports (user_id, created_at DESC);
        CREATE INDEX IF NOT EXISTS imports_running ON imports (created_at) WHERE status = 'running';

        CREATE TABLE IF NOT EXISTS import_entries (
            import_id uuid NOT NULL REFERENCES imports(id) ON DELETE CASCADE,
            ord integer NOT NULL,
            line integer NOT NULL,
            url text,
            text text,
            kind text,
            title text,
            metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
            folder_ids uuid[] NOT NULL DEFAULT '{}',
            in_kb boolean NOT NULL DEFAULT true,
            archived boolean NOT NULL DEFAULT false,
            outputs jsonb NOT NULL DEFAULT '[]'::jsonb,
            status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
            existing boolean NOT NULL DEFAULT false,
            item_id uuid,
            error text,
            PRIMARY KEY (import_id, ord)
        );
        CREATE INDEX IF NOT EXISTS import_entries_pending ON import_entries (import_id, ord) WHERE status = 'pending';
        CREATE INDEX IF NOT EXISTS user_items_user_url ON user_items (user_id, url) WHERE url IS NOT NULL;
    """)


def downgrade() -> None:
    op.execute("""
        DROP INDEX IF EXISTS user_items_user_url;
        DROP TABLE IF EXISTS import_entries;
        DROP TABLE IF EXISTS imports;
        ALTER TABLE chunks DROP COLUMN IF EXISTS end_sec;
        ALTER TABLE chunks DROP COLUMN IF EXISTS start_sec;
        ALTER TABLE user_items DROP COLUMN IF EXISTS metadata;
    """)
