"""The monthly write cap's counter lives in PostgreSQL (it lived in Redis and was forgotten by a crash).

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE IF NOT EXISTS token_monthly_writes (
            token_id uuid NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
            month text NOT NULL,
            writes integer NOT NULL,
            PRIMARY KEY (token_id, month)
        )""")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS token_monthly_writes")
