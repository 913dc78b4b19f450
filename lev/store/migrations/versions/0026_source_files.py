"""Whole folders (issue 48): a file Lev keeps by its path. `source_files` remembers, per user, which item came from
which path (`Vault/Projects/plan.md`: the folder it is filed in, then its name) and the SHA-256 of the bytes it was
made from, so a folder imported or synced again adds nothing and a changed file updates its item in place. An
import of a ZIP keeps the archive as an object until it is done (`imports.object_path`); its entries are files
(`path`, the `member` of the archive, its `mime`) and say what they did (`change`: added, updated, unchanged) and
which highlights lost their words (`lost`).

Revision ID: 0026
Revises: 0025
"""

from alembic import op

revision = "0026"
down_revision = "0025"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE IF NOT EXISTS source_files (
            user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            path text COLLATE "C" NOT NULL,
            item_id uuid NOT NULL REFERENCES user_items(id) ON DELETE CASCADE,
            sha256 text NOT NULL,
            size_bytes bigint NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (user_id, path)
        );
        CREATE UNIQUE INDEX IF NOT EXISTS source_files_item ON source_files (item_id);
        ALTER TABLE imports ADD COLUMN IF NOT EXISTS object_path text,
                            ADD COLUMN IF NOT EXISTS skipped_total integer;
        ALTER TABLE import_entries ADD COLUMN IF NOT EXISTS path text,
                                   ADD COLUMN IF NOT EXISTS member text,
                                   ADD COLUMN IF NOT EXISTS mime text,
                                   ADD COLUMN IF NOT EXISTS change text,
                                   ADD COLUMN IF NOT EXISTS lost jsonb;
    """)


def downgrade() -> None:
    op.execute("""
        ALTER TABLE import_entries DROP COLUMN IF EXISTS path, DROP COLUMN IF EXISTS member,
                                   DROP COLUMN IF EXISTS mime, DROP COLUMN IF EXISTS change,
                                   DROP COLUMN IF EXISTS lost;
        ALTER TABLE imports DROP COLUMN IF EXISTS object_path, DROP COLUMN IF EXISTS skipped_total;
        DROP TABLE IF EXISTS source_files;
    """)
