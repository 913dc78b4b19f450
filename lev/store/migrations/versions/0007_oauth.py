"""OAuth 2.1 for MCP clients: a grant is a row of `tokens` (kind 'oauth', bound to its client and its RFC 8707
resource, with a short-lived access token); registered clients, authorization codes and refresh tokens get
their own tables. Only SHA-256 digests of codes, tokens and client secrets are stored.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    op.execute("""
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS kind text NOT NULL DEFAULT 'token';
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS client_id text;
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS resource text;
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS access_expires_at timestamptz;
CREATE INDEX IF NOT EXISTS tokens_client ON tokens (client_id) WHERE client_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS oauth_clients (
    client_id text PRIMARY KEY,
    kind text NOT NULL,
    client_name text,
    client_uri text,
    redirect_uris text[] NOT NULL,
    auth_method text NOT NULL,
    secret_hash bytea,
    metadata jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    stale_at timestamptz
);

CREATE TABLE IF NOT EXISTS oauth_codes (
    code_hash bytea PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    client_id text NOT NULL,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    resource text NOT NULL,
    choice jsonb NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    token_id uuid REFERENCES tokens(id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS oauth_codes_expires ON oauth_codes (expires_at);

CREATE TABLE IF NOT EXISTS oauth_refresh_tokens (
    token_hash bytea PRIMARY KEY,
    token_id uuid NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    rotated_at timestamptz
);
CREATE INDEX IF NOT EXISTS oauth_refresh_tokens_token ON oauth_refresh_tokens (token_id);
""")


def downgrade() -> None:
    op.execute("""
DROP TABLE IF EXISTS oauth_refresh_tokens;
DROP TABLE IF EXISTS oauth_codes;
DROP TABLE IF EXISTS oauth_clients;
DROP INDEX IF EXISTS tokens_client;
ALTER TABLE tokens DROP COLUMN IF EXISTS access_expires_at;
ALTER TABLE tokens DROP COLUMN IF EXISTS resource;
ALTER TABLE tokens DROP COLUMN IF EXISTS client_id;
ALTER TABLE tokens DROP COLUMN IF EXISTS kind;
""")
