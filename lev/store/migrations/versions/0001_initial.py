"""Initial schema: users, folders, contents, items, memberships, chunks, outputs, tokens, activity.

Revision ID: 0001
Revises:
"""

from alembic import op

revision = "0001"
down_revision = None

SCHEMA = """
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE users (
    id uuid PRIMARY KEY,
    email text NOT NULL,
    password_hash text,
    tier text NOT NULL DEFAULT 'free' CHECK (tier IN ('free', 'pro')),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_ci ON users (lower(email));

CREATE TABLE folders (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX folders_user_name_ci ON folders (user_id, lower(name));

CREATE TABLE contents (
    id uuid PRIMARY KEY,
    kind text NOT NULL,
    canonical_url text,
    url text,
    title text,
    text text,
    metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    mime text,
    object_path text,
    size_bytes bigint,
    duration_sec double precision,
    transcript text,
    status text NOT NULL DEFAULT 'ready',
    error text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX contents_canonical_url ON contents (canonical_url) WHERE canonical_url IS NOT NULL;
CREATE UNIQUE INDEX contents_object_path ON contents (object_path) WHERE object_path IS NOT NULL;

CREATE TABLE user_items (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    content_id uuid NOT NULL REFERENCES contents(id),
    kind text NOT NULL,
    title text,
    url text,
    in_kb boolean NOT NULL DEFAULT true,
    archived boolean NOT NULL DEFAULT false,
    status text NOT NULL DEFAULT 'ready' CHECK (status IN ('processing', 'ready', 'failed')),
    transcription_status text NOT NULL DEFAULT 'not_required'
        CHECK (transcription_status IN ('not_required', 'pending', 'done', 'failed')),
    error text,
    auto_transform boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_items_user_created ON user_items (user_id, created_at DESC, id DESC);
CREATE INDEX user_items_content ON user_items (content_id);

CREATE TABLE item_folders (
    item_id uuid NOT NULL REFERENCES user_items(id) ON DELETE CASCADE,
    folder_id uuid NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (item_id, folder_id)
);
CREATE INDEX item_folders_folder ON item_folders (folder_id, item_id);

CREATE TABLE chunks (
    id uuid PRIMARY KEY,
    content_id uuid NOT NULL REFERENCES contents(id) ON DELETE CASCADE,
    ord integer NOT NULL,
    title text,
    text text NOT NULL,
    embedding vector(384) NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('english', text), 'B')
    ) STORED
);
CREATE INDEX chunks_content ON chunks (content_id, ord);
CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops);
CREATE INDEX chunks_tsv_gin ON chunks USING gin (tsv);

CREATE TABLE outputs (
    id uuid PRIMARY KEY,
    item_id uuid NOT NULL REFERENCES user_items(id) ON DELETE CASCADE,
    kind text NOT NULL,
    content jsonb NOT NULL,
    generator text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outputs_item ON outputs (item_id);

CREATE TABLE tokens (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name text NOT NULL,
    token_hash bytea NOT NULL UNIQUE,
    prefix text NOT NULL,
    capabilities text[] NOT NULL DEFAULT ARRAY['read'],
    is_unscoped boolean NOT NULL,
    kb_only boolean NOT NULL DEFAULT true,
    write_cap integer NOT NULL DEFAULT 200,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    last_used_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tokens_user ON tokens (user_id);

CREATE TABLE token_folders (
    token_id uuid NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
    folder_id uuid NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
    PRIMARY KEY (token_id, folder_id)
);
CREATE INDEX token_folders_folder ON token_folders (folder_id);

CREATE TABLE activity (
    id bigserial PRIMARY KEY,
    ts timestamptz NOT NULL,
    user_id uuid REFERENCES users(id) ON DELETE CASCADE,
    token_id uuid,
    surface text NOT NULL,
    method text NOT NULL,
    status integer NOT NULL,
    ip text,
    user_agent text,
    result_count integer,
    latency_ms double precision NOT NULL,
    query text,
    request_id text
);
CREATE INDEX activity_user_ts ON activity (user_id, ts DESC);
CREATE INDEX activity_ts ON activity (ts);

CREATE TABLE object_deletions (
    path text PRIMARY KEY,
    attempts integer NOT NULL DEFAULT 0,
    last_error text,
    queued_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE uploads (
    path text PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    mime text NOT NULL,
    size_bytes bigint NOT NULL,
    filename text NOT NULL,
    item_id uuid REFERENCES user_items(id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE usage_monthly (
    user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    month text NOT NULL,
    transcription_seconds double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, month)
);
"""


def upgrade() -> None:
    op.execute(SCHEMA)
