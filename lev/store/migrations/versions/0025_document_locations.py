"""Where a passage of a document stands besides its characters and heading: the slide a presentation's passage
starts on, the sheet and rows of a spreadsheet's passage (`store.locations.Location`). Nullable columns only: a
chunk stored before keeps its location as it was.

Revision ID: 0025
Revises: 0024
"""

from alembic import op

revision = "0025"
down_revision = "0024"  # after main's 0024 (re-chained when main was merged into folders)


def upgrade() -> None:
    op.execute("""
ALTER TABLE chunk_locations ADD COLUMN IF NOT EXISTS slide integer;
ALTER TABLE chunk_locations ADD COLUMN IF NOT EXISTS sheet text;
ALTER TABLE chunk_locations ADD COLUMN IF NOT EXISTS row_start integer;
ALTER TABLE chunk_locations ADD COLUMN IF NOT EXISTS row_end integer;
""")


def downgrade() -> None:
    op.execute("""
ALTER TABLE chunk_locations DROP COLUMN IF EXISTS slide, DROP COLUMN IF EXISTS sheet,
  DROP COLUMN IF EXISTS row_start, DROP COLUMN IF EXISTS row_end;
""")
