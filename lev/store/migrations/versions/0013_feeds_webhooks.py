"""Feeds (followed RSS, Atom and JSON Feed sources, and every entry they brought, the record of promised polls) and
webhooks (endpoints, the outbox of events and their deliveries, each attempt as the deliveries list shows it).

Revision ID: 0013
Revises: 0011
"""

from alembic import op

revision = "0013"
down_revision = "0011"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE IF NOT EXISTS feeds (
            id uuid PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            folder_id uuid REFERENCES folders(id) ON DELETE SET NULL,
            url text NOT NULL,
            site_url text,
            title text,
            feed_title text,
            paused boolean NOT NULL DEFAULT false,
            failures integer NOT NULL DEFAULT 0,
            etag text,
            last_modified text,
            last_checked_at timestamptz,
            last_success_at timestamptz,
            last_error text,
            next_poll_at timestamptz NOT NULL DEFAULT now(),
            entries_ingested integer NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE UNIQUE INDEX IF NOT EXISTS feeds_user_url ON feeds (user_id, md5(url));
        CREATE INDEX IF NOT EXISTS feeds_due ON feeds (next_poll_at) WHERE NOT paused;
        CREATE INDEX IF NOT EXISTS feeds_folder ON feeds (folder_id) WHERE folder_id IS NOT NULL;

        CREATE TABLE IF NOT EXISTS feed_entries (
            id uuid PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            feed_id uuid NOT NULL REFERENCES feeds(id) ON DELETE CASCADE,
            guid_key bytea NOT NULL,
            url_key bytea,
            url text,
            title text,
            published_at timestamptz,
            status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed', 'skipped')),
            item_id uuid,
            error text,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE UNIQUE INDEX IF NOT EXISTS feed_entries_user_guid ON feed_entries (user_id, guid_key);
        CREATE UNIQUE INDEX IF NOT EXISTS feed_entries_user_url ON feed_entries (user_id, url_key)
            WHERE url_key IS NOT NULL;
        CREATE INDEX IF NOT EXISTS feed_entries_pending ON feed_entries (feed_id, published_at)
            WHERE status = 'pending';

        CREATE TABLE IF NOT EXISTS webhooks (
            id uuid PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            url text NOT NULL,
            description text,
            events text[] NOT NULL,
            secret text NOT NULL,
            previous_secret text,
            previous_secret_until timestamptz,
            enabled boolean NOT NULL DEFAULT true,
            disabled_reason text,
            failing_since timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX IF NOT EXISTS webhooks_user ON webhooks (user_id) WHERE enabled;

        CREATE TABLE IF NOT EXISTS webhook_events (
            id text PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            type text NOT NULL,
            payload jsonb NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX IF NOT EXISTS webhook_events_created ON webhook_events (created_at);

        CREATE TABLE IF NOT EXISTS webhook_deliveries (
            id uuid PRIMARY KEY,
            webhook_id uuid NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
            event_id text NOT NULL REFERENCES webhook_events(id) ON DELETE CASCADE,
            status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            locked_until timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz
        );
        CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
            WHERE status = 'pending';
        CREATE INDEX IF NOT EXISTS webhook_deliveries_event ON webhook_deliveries (event_id);

        CREATE TABLE IF NOT EXISTS webhook_attempts (
            id uuid PRIMARY KEY,
            delivery_id uuid NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
            webhook_id uuid NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
            event_id text NOT NULL,
            event_type text NOT NULL,
            attempt integer NOT NULL,
            status text NOT NULL CHECK (status IN ('succeeded', 'retrying', 'failed')),
            status_code integer,
            error text,
            response text,
            duration_ms integer NOT NULL,
            next_attempt_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX IF NOT EXISTS webhook_attempts_recent ON webhook_attempts (webhook_id, created_at DESC);
        CREATE INDEX IF NOT EXISTS webhook_attempts_delivery ON webhook_attempts (delivery_id);
    """)


def downgrade() -> None:
    op.execute("""
        DROP TABLE IF EXISTS webhook_attempts;
        DROP TABLE IF EXISTS webhook_deliveries;
        DROP TABLE IF EXISTS webhook_events;
        DROP TABLE IF EXISTS webhooks;
        DROP TABLE IF EXISTS feed_entries;
        DROP TABLE IF EXISTS feeds;
    """)
