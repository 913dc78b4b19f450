"""Archived copies (issue 50): one self-contained HTML snapshot per fetched web page and per captured page (a
content). `archives` holds the page's HTML as fetched or captured (`source`) until the worker has made the snapshot,
then where the snapshot is in the object store, its size, how many resources were inlined and which were left out.
Deleting a content deletes its archive row, and a trigger queues the snapshot's object for the deletion drain, on
every path that deletes contents.

Revision ID: 0028
Revises: 0027
"""

from alembic import op

revision = "0028"
down_revision = "0027"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE IF NOT EXISTS archives (
            content_id uuid PRIMARY KEY REFERENCES contents(id) ON DELETE CASCADE,
            status text NOT NULL CHECK (status IN ('pending', 'ready', 'failed')),
            url text NOT NULL,
            source bytea,
            charset text,
            object_path text,
            size_bytes bigint,
            resources integer NOT NULL DEFAULT 0,
            skipped jsonb NOT NULL DEFAULT '[]'::jsonb,
            error text,
            created_at timestamptz NOT NULL DEFAULT now(),
            saved_at timestamptz
        );
        CREATE INDEX IF NOT EXISTS archives_pending ON archives (created_at) WHERE status = 'pending';
        CREATE OR REPLACE FUNCTION lev_archive_gone() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF OLD.object_path IS NOT NULL THEN
                INSERT INTO object_deletions (path, attempts) VALUES (OLD.object_path, 0) ON CONFLICT DO NOTHING;
            END IF;
            RETURN OLD;
        END $$;
        DROP TRIGGER IF EXISTS archives_gone ON archives;
        CREATE TRIGGER archives_gone AFTER DELETE ON archives FOR EACH ROW EXECUTE FUNCTION lev_archive_gone();
    """)


def downgrade() -> None:
    op.execute("""
        DROP TABLE IF EXISTS archives;
        DROP FUNCTION IF EXISTS lev_archive_gone();
    """)
