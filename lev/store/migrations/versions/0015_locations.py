"""Locations and search filters: where each chunk stands in its item's text (characters, PDF pages, the heading
above it), the text's outline beside it, and the host of an item's URL (`lev_url_host`, indexed: the `site`
filter).

Chunks stored before this revision get their characters and headings here: the content's text (a recording's
transcript) is stored in its normalised form (white space only; the form chunks were always cut from) and each
chunk is found in it. The pages of older PDFs are found by the worker (`tasks.housekeeping.locate_pages`), which
reads the stored files.

Revision ID: 0015
Revises: 0016
"""

from __future__ import annotations

import json
import re
from typing import Any

from alembic import op
from sqlalchemy import text

from lev.store.locations import Outline, locate, locations, markdown_headings, normalize_text, normalize_whitespace

revision = "0015"
down_revision = "0016"

RECORDING_KINDS = ("audio", "video", "youtube")
BATCH = 200

SCHEMA = r"""
-- One row per chunk (a table of its own: setting a location never rewrites a chunk, its vector or its postings).
CREATE TABLE IF NOT EXISTS chunk_locations (
    chunk_id uuid PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    char_start integer,
    char_end integer,
    page integer,
    page_end integer,
    heading text
);
ALTER TABLE contents ADD COLUMN IF NOT EXISTS outline jsonb;

-- The host of an item's URL, lower case, without user info, port or a trailing dot: the `site` filter.
CREATE OR REPLACE FUNCTION lev_url_host(url text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT nullif(rtrim(lower(substring(url FROM
  '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?(\[[^]/?#]*\]|[^/?#:]*)')), '.'), '') $$;
CREATE INDEX IF NOT EXISTS user_items_host ON user_items (user_id, lev_url_host(url)) WHERE url IS NOT NULL;
"""

_SET_LOCATIONS = text("""
INSERT INTO chunk_locations (chunk_id, char_start, char_end, heading)
SELECT * FROM unnest(CAST(:ids AS uuid[]), CAST(:s AS int[]), CAST(:e AS int[]), CAST(:h AS text[]))
ON CONFLICT (chunk_id) DO NOTHING
""")
_FIX_TEXT = text("""
UPDATE chunks c SET text = u.t FROM unnest(CAST(:ids AS uuid[]), CAST(:t AS text[])) AS u(id, t) WHERE c.id = u.id
""")


def _loose(text_: str, body: str, start: int) -> tuple[int, int] | None:
    """Where `body` stands in `text_` if white space may differ (a transcript stored as its provider wrote it, its
    chunks cut from the timed segments, one per line)."""
    words = body.split()
    if not words:
        return None
    pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
    found = pattern.search(text_, start) or pattern.search(text_)
    return (found.start(), found.end()) if found else None


def _backfill_content(conn: Any, row: Any) -> None:
    field = "transcript" if row.kind in RECORDING_KINDS and row.transcript else "text"
    stored = row.transcript if field == "transcript" else row.text
    chunk_rows = conn.execute(text("SELECT id, text FROM chunks WHERE content_id = :c ORDER BY ord"),
                              {"c": row.id}).all()
    if not chunk_rows:
        return
    bodies = [c.text for c in chunk_rows]
    # the stored form chunks are cut from; before runs of one character were cut (issue 38), white space alone
    norm = normalize_text(stored or "")
    spans = locate(norm, bodies)
    if not all(spans):
        spaced = normalize_whitespace(stored or "")
        found_spaced = locate(spaced, bodies)
        if all(found_spaced):
            norm, spans = spaced, found_spaced
    outline = Outline().with_headings(markdown_headings(norm)) if field == "text" else Outline()
    fixed: list[str | None] = [None] * len(spans)
    cursor = 0
    for i, c in enumerate(chunk_rows):
        if spans[i] is None:
            spans[i] = _loose(norm, c.text, cursor)
            if spans[i] is not None:
                a, b = spans[i]  # type: ignore[misc]
                fixed[i] = norm[a:b]
        if spans[i] is not None:
            cursor = spans[i][0] + 1  # type: ignore[index]
    found = locations(spans, outline)
    if stored is not None and norm != stored:
        conn.execute(text(f"UPDATE contents SET {field} = :t WHERE id = :c"), {"t": norm, "c": row.id})
        _move_highlights(conn, row.id, stored, norm)
    if outline.to_json() is not None:
        conn.execute(text("UPDATE contents SET outline = CAST(:o AS jsonb) WHERE id = :c"),
                     {"o": json.dumps(outline.to_json()), "c": row.id})
    conn.execute(_SET_LOCATIONS, {"ids": [c.id for c in chunk_rows], "s": [f.char_start for f in found],
                                  "e": [f.char_end for f in found], "h": [f.heading for f in found]})
    changed = [(c.id, t) for c, t in zip(chunk_rows, fixed, strict=True) if t is not None and t != c.text]
    if changed:  # the same words: the chunk's postings are written again unchanged
        conn.execute(_FIX_TEXT, {"ids": [i for i, _ in changed], "t": [t for _, t in changed]})


def _move_highlights(conn: Any, content_id: Any, old: str, new: str) -> None:
    """Highlights made on the text before it was stored normalised (0018 ran first): moved onto the same words of
    the normalised text, their text the new slice."""
    marks = conn.execute(text("SELECT h.id, h.text, h.char_start FROM highlights h"
                              " JOIN user_items u ON u.id = h.item_id WHERE u.content_id = :c"),
                         {"c": content_id}).all()
    for mark in marks:
        near = max(0, int(mark.char_start * len(new) / max(len(old), 1)) - 1000)
        at, words = -1, ""
        for words in dict.fromkeys((normalize_text(mark.text), normalize_whitespace(mark.text))):
            at = new.find(words, near) if words else -1
            at = new.find(words) if at < 0 and words else at
            if at >= 0:
                break
        if at >= 0:
            conn.execute(text("UPDATE highlights SET char_start = :s, char_end = :e, text = :t WHERE id = :i"),
                         {"s": at, "e": at + len(words), "t": words, "i": mark.id})


def backfill(conn: Any) -> None:
    """Characters and headings of every chunk stored before this revision, content by content."""
    todo = list(conn.execute(text(
        "SELECT DISTINCT c.content_id FROM chunks c"
        " WHERE NOT EXISTS (SELECT 1 FROM chunk_locations l WHERE l.chunk_id = c.id)")).scalars())
    for at in range(0, len(todo), BATCH):
        rows = conn.execute(text("SELECT id, kind, text, transcript FROM contents WHERE id = ANY(:ids)"),
                            {"ids": todo[at:at + BATCH]}).all()
        for row in rows:
            _backfill_content(conn, row)


def upgrade() -> None:
    op.execute(SCHEMA)
    backfill(op.get_bind())
