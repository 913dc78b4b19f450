"""BM25 keyword scoring inside PostgreSQL: document lengths, a postings table, term and corpus statistics.

Statistics are global across users and kept exact by statement-level triggers on `chunks`.
See bench/LAB_NOTES.md for how this was chosen and measured.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"

# The pieces are kept apart so that bench/scifact_lab.py builds its lab schema from this very SQL.
TSV_LEN_SQL = r"""

-- Immutable helper: number of tokens (positions) in a tsvector = BM25 document length.
CREATE OR REPLACE FUNCTION lev_tsv_len(v tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT coalesce(sum(cardinality(u.positions)), 0)::int FROM unnest(v) AS u $$;


"""

CHUNKS_DL_SQL = r"""ALTER TABLE chunks ADD COLUMN bm25_dl integer GENERATED ALWAYS AS (lev_tsv_len(
    setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
    setweight(to_tsvector('english', text), 'B'))) STORED;


"""

# Postings, term and corpus statistics, their maintenance trigger and the query-term function.
BM25_SQL = r"""-- Inverted index (one row per chunk x lexeme). content_id is denormalised so the scope
-- predicate can be applied on postings without joining chunks.
CREATE TABLE lev_postings (
  lexeme     text     NOT NULL,
  chunk_id   uuid     NOT NULL,
  content_id uuid     NOT NULL,
  tf         smallint NOT NULL,  -- occurrences of lexeme in title + text (title weight 1.0 was best)
  dl         int      NOT NULL,  -- = chunks.bm25_dl
  -- covering PK: posting-list scans and (lexeme, chunk_id) probes are index-only
  PRIMARY KEY (lexeme, chunk_id) INCLUDE (content_id, tf, dl)
);

-- Document frequency per lexeme (global across all users).
CREATE TABLE lev_bm25_terms (
  lexeme text PRIMARY KEY,
  df     int  NOT NULL
);
-- Corpus totals (single row).
CREATE TABLE lev_bm25_stats (
  id        boolean PRIMARY KEY DEFAULT true CHECK (id),
  n_chunks  bigint NOT NULL DEFAULT 0,
  total_len bigint NOT NULL DEFAULT 0
);
INSERT INTO lev_bm25_stats DEFAULT VALUES;

-- Statement-level maintenance (transition tables: one pass per INSERT/COPY/DELETE/UPDATE
-- statement). Writers serialise on the single stats row, which each firing locks first.
CREATE OR REPLACE FUNCTION lev_bm25_maintain() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  -- Lock the stats row first: chunk writers serialise here, before touching any term row, so term
  -- locks are never taken in conflicting orders (a transaction may fire this trigger several times,
  -- e.g. for FK-cascaded deletes of several contents).
  PERFORM 1 FROM lev_bm25_stats FOR UPDATE;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    DELETE FROM lev_postings p
     USING (SELECT u.lexeme, o.id FROM old_rows o, unnest(o.tsv) u) d
     WHERE p.lexeme = d.lexeme AND p.chunk_id = d.id;
    UPDATE lev_bm25_terms t SET df = t.df - d.n
      FROM (SELECT u.lexeme, count(*) AS n FROM old_rows o, unnest(o.tsv) u
             GROUP BY 1 ORDER BY 1) d
     WHERE t.lexeme = d.lexeme;
    DELETE FROM lev_bm25_terms t
     USING (SELECT DISTINCT u.lexeme FROM old_rows o, unnest(o.tsv) u) d
     WHERE t.lexeme = d.lexeme AND t.df <= 0;
    UPDATE lev_bm25_stats
       SET n_chunks  = n_chunks  - (SELECT count(*) FROM old_rows),
           total_len = total_len - (SELECT coalesce(sum(bm25_dl), 0) FROM old_rows);
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO lev_postings (lexeme, chunk_id, content_id, tf, dl)
    SELECT u.lexeme, n.id, n.content_id, cardinality(u.positions), n.bm25_dl
      FROM new_rows n, unnest(n.tsv) u;
    INSERT INTO lev_bm25_terms AS t (lexeme, df)
    SELECT u.lexeme, count(*) FROM new_rows n, unnest(n.tsv) u GROUP BY 1 ORDER BY 1
    ON CONFLICT (lexeme) DO UPDATE SET df = t.df + EXCLUDED.df;
    UPDATE lev_bm25_stats
       SET n_chunks  = n_chunks  + (SELECT count(*) FROM new_rows),
           total_len = total_len + (SELECT coalesce(sum(bm25_dl), 0) FROM new_rows);
  END IF;
  RETURN NULL;
END $$;

-- Query terms with BM25 constants. idf is Lucene's ln(1 + (N - df + 0.5)/(df + 0.5));
-- per posting: idf * tf / (tf + kb0 + kb1 * dl)  ==  idf * tf / (tf + k1*(1 - b + b*dl/avgdl)).
-- sel marks the terms used for candidate generation: df <= prune_df * N, plus the
-- keep_rarest rarest terms (so a query of only common words still finds candidates).
CREATE OR REPLACE FUNCTION lev_bm25_query(query text, k1 float8 DEFAULT 1.2, b float8 DEFAULT 0.6,
                                          prune_df float8 DEFAULT 0.03, keep_rarest int DEFAULT 3)
RETURNS TABLE (lexeme text, df int, idf float8, kb0 float8, kb1 float8, sel boolean)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT t.lexeme, t.df,
         ln(1 + (s.n_chunks - t.df + 0.5::float8) / (t.df + 0.5::float8)),
         k1 * (1 - b),
         k1 * b * greatest(s.n_chunks, 1)::float8 / greatest(s.total_len, 1),
         t.df <= prune_df * s.n_chunks OR row_number() OVER (ORDER BY t.df, t.lexeme) <= keep_rarest
    FROM lev_bm25_stats s
    JOIN lev_bm25_terms t ON t.lexeme = ANY (tsvector_to_array(to_tsvector('english', query)))
$$;

CREATE TRIGGER chunks_bm25_ins AFTER INSERT ON chunks
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lev_bm25_maintain();
CREATE TRIGGER chunks_bm25_del AFTER DELETE ON chunks
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION lev_bm25_maintain();
CREATE TRIGGER chunks_bm25_upd AFTER UPDATE ON chunks
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION lev_bm25_maintain();

"""

BACKFILL_SQL = r"""-- Backfill from chunks stored before this migration.
INSERT INTO lev_postings (lexeme, chunk_id, content_id, tf, dl)
SELECT u.lexeme, c.id, c.content_id, cardinality(u.positions), c.bm25_dl FROM chunks c, unnest(c.tsv) u;
INSERT INTO lev_bm25_terms (lexeme, df)
SELECT u.lexeme, count(*) FROM chunks c, unnest(c.tsv) u GROUP BY 1;
UPDATE lev_bm25_stats SET n_chunks = (SELECT count(*) FROM chunks),
                          total_len = (SELECT coalesce(sum(bm25_dl), 0) FROM chunks);
"""

SCHEMA = TSV_LEN_SQL + CHUNKS_DL_SQL + BM25_SQL + BACKFILL_SQL



def upgrade() -> None:
    op.execute(SCHEMA)
