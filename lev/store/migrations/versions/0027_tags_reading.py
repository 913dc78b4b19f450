"""Tags and reading (issue 50). A tag is one user's name for a set of their items (`tags`, unique per user by its
case-folded `key`, nested with `/`); `item_tags` says which items carry it. `user_items.tag_keys` holds the keys of an
item's tags and of their parents (`work/clients/acme` also gives `work/clients` and `work`), kept by the store's tag
writes, so a tag filter is one indexed containment test on the row itself (`tag_keys @> ARRAY[...]`). Reading: an
item's `read_at` (null: unread) and how far it was read (`progress`, 0 to 1).

The tags that imports used to keep in an item's metadata (`metadata.tags`) become the item's tags.

Revision ID: 0027
Revises: 0024 (0023 when written; re-chained after main brought 0024)
"""

from __future__ import annotations

import uuid

from alembic import op
from sqlalchemy import Connection, text

from lev.store.tags import clean_name, key_of, keys_with_parents

revision = "0027"
down_revision = "0026"  # after issue 48's 0025 and 0026 (re-chained at the merge)


def upgrade() -> None:
    op.execute("""
        CREATE TABLE IF NOT EXISTS tags (
            id uuid PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 64),
            key text COLLATE "C" NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (user_id, key)
        );
        CREATE TABLE IF NOT EXISTS item_tags (
            item_id uuid NOT NULL REFERENCES user_items(id) ON DELETE CASCADE,
            tag_id uuid NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (item_id, tag_id)
        );
        CREATE INDEX IF NOT EXISTS item_tags_tag ON item_tags (tag_id, item_id);
        ALTER TABLE user_items ADD COLUMN IF NOT EXISTS tag_keys text[] COLLATE "C" NOT NULL DEFAULT '{}';
        CREATE INDEX IF NOT EXISTS user_items_tag_keys ON user_items USING gin (tag_keys);
        ALTER TABLE user_items ADD COLUMN IF NOT EXISTS read_at timestamptz;
        ALTER TABLE user_items ADD COLUMN IF NOT EXISTS progress real NOT NULL DEFAULT 0;
        ALTER TABLE user_items DROP CONSTRAINT IF EXISTS user_items_progress_range;
        ALTER TABLE user_items ADD CONSTRAINT user_items_progress_range CHECK (progress >= 0 AND progress <= 1);
    """)
    tags_from_metadata(op.get_bind())


def tags_from_metadata(conn: Connection) -> int:
    """Every item's `metadata.tags` (a list of strings, as the imports read them) as real tags, then gone from the
    metadata; how many items had some."""
    rows = conn.execute(text(
        "SELECT id, user_id, metadata->'tags' FROM user_items"
        " WHERE jsonb_typeof(metadata->'tags') = 'array' ORDER BY user_id, id")).all()
    known: dict[tuple[uuid.UUID, str], uuid.UUID] = {}
    for item_id, user_id, raw in rows:
        names = [n for n in (clean_name(v, lenient=True) for v in raw if isinstance(v, str)) if n][:100]
        keys: list[str] = []
        for name in names:
            key = key_of(name)
            tag_id = known.get((user_id, key))
            if tag_id is None:
                tag_id = conn.execute(text(
                    "INSERT INTO tags (id, user_id, name, key) VALUES (:id, :u, :n, :k)"
                    " ON CONFLICT (user_id, key) DO UPDATE SET name = tags.name RETURNING id"),
                    {"id": uuid.uuid4(), "u": user_id, "n": name, "k": key}).scalar_one()
                known[(user_id, key)] = tag_id
            conn.execute(text("INSERT INTO item_tags (item_id, tag_id) VALUES (:i, :t) ON CONFLICT DO NOTHING"),
                         {"i": item_id, "t": tag_id})
            keys.append(key)
        conn.execute(text("UPDATE user_items SET metadata = metadata - 'tags', tag_keys = :keys WHERE id = :i"),
                     {"i": item_id, "keys": keys_with_parents(keys)})
    return len(rows)


def downgrade() -> None:
    op.execute("""
        ALTER TABLE user_items DROP CONSTRAINT IF EXISTS user_items_progress_range;
        ALTER TABLE user_items DROP COLUMN IF EXISTS progress;
        ALTER TABLE user_items DROP COLUMN IF EXISTS read_at;
        DROP INDEX IF EXISTS user_items_tag_keys;
        ALTER TABLE user_items DROP COLUMN IF EXISTS tag_keys;
        DROP TABLE IF EXISTS item_tags;
        DROP TABLE IF EXISTS tags;
    """)
