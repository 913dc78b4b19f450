"""The outbox read endpoint by endpoint, and a followed feed's progress.

A sender's claim takes each endpoint's oldest due deliveries through an index by endpoint and time
(`webhook_deliveries_pending`, replacing the index by time alone), so a failing endpoint's backlog of due retries
never fills the window another endpoint's deliveries are found in. A feed counts the entries recorded for it
(`entries_found`, counted once here for the feeds followed before), shown while its entries arrive.

Revision ID: 0024
Revises: 0023
"""

from alembic import op

revision = "0024"
down_revision = "0023"


def upgrade() -> None:
    op.execute("""
        CREATE INDEX IF NOT EXISTS webhook_deliveries_pending ON webhook_deliveries (webhook_id, next_attempt_at)
            WHERE status = 'pending';
        DROP INDEX IF EXISTS webhook_deliveries_due;
        ALTER TABLE feeds ADD COLUMN IF NOT EXISTS entries_found integer NOT NULL DEFAULT 0;
        UPDATE feeds f SET entries_found = n.found
        FROM (SELECT feed_id, count(*) AS found FROM feed_entries GROUP BY feed_id) n WHERE n.feed_id = f.id;
    """)


def downgrade() -> None:
    op.execute("""
        CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
            WHERE status = 'pending';
        DROP INDEX IF EXISTS webhook_deliveries_pending;
        ALTER TABLE feeds DROP COLUMN IF EXISTS entries_found;
    """)
