"""BM25 statistics stay exact under ingest and delete; both vector-scan strategies respect the scope."""

from __future__ import annotations

import uuid

import pytest

CHECK = """
SELECT
 (SELECT count(*) FROM chunks) = s.n_chunks AND
 (SELECT coalesce(sum(bm25_dl), 0) FROM chunks) = s.total_len AS totals_ok,
 (SELECT count(*) FROM (SELECT u.lexeme, count(*) AS df FROM chunks c, unnest(c.tsv) u GROUP BY 1
                        EXCEPT SELECT lexeme, df FROM lev_bm25_terms) x) AS df_missing,
 (SELECT count(*) FROM (SELECT lexeme, df FROM lev_bm25_terms
                        EXCEPT SELECT u.lexeme, count(*) FROM chunks c, unnest(c.tsv) u GROUP BY 1) x) AS df_extra,
 (SELECT count(*) FROM lev_postings) = (SELECT count(*) FROM chunks c, unnest(c.tsv)) AS postings_ok
FROM lev_bm25_stats s
"""


def test_bm25_statistics_exact_after_ingest_and_delete(server, api, user, admin) -> None:
    c = api(user.token(write=True))
    ids = [c.post("/api/v1/ingest", json={"kind": "text", "text": f"Porcupine quills number {i} thousand, "
                                                                 f"and porcupines climb trees.",
                                          "auto_transform": False}).json()["user_item_id"] for i in range(4)]
    row = admin.sql(CHECK)[0]
    assert row.totals_ok and row.df_missing == 0 and row.df_extra == 0 and row.postings_ok
    for i in ids[:2]:
        assert c.delete(f"/api/v1/items/{i}").status_code == 200
    row = admin.sql(CHECK)[0]
    assert row.totals_ok and row.df_missing == 0 and row.df_extra == 0 and row.postings_ok
    res = c.get("/api/v1/search", params={"q": "porcupine quills", "mode": "keyword", "limit": 10}).json()
    assert {r["item_id"] for r in res["results"]} == set(ids[2:])
    scores = [r["keyword_rank"] for r in res["results"]]
    assert all(s > 0 for s in scores) and scores == sorted(scores, reverse=True)


async def _nearest(s, scope, plan, vec: list[float], limit: int, vec_min: int,  # type: ignore[no-untyped-def]
                   ef: int | None = None, iterative: bool = True) -> list[tuple[str, float]]:
    """The semantic statement of `plan` (its walk at `ef` if given; not iterative, in the caller's transaction, if
    asked): (item, cosine) of its rows."""
    from dataclasses import replace

    from sqlalchemy import text

    from lev.store import scoped_sql
    from lev.store import search as search_store

    await search_store.use_plan_walk(s, plan if ef is None else replace(plan, ef=ef))
    if not iterative:  # a walk that stops after its first `ef` candidates, as one stopped by max_scan_tuples
        await s.execute(text("SET LOCAL hnsw.iterative_scan = off"))
        # a test database of few chunks may rather be read whole and sorted: then nothing would be walked
        await s.execute(text("SET LOCAL enable_seqscan = off"))
    found = scoped_sql.item_sql(scope, None)
    sql = search_store.SEMANTIC_SQL.format(nearest=plan.nearest(":limit"), item=found.sql)
    rows = await s.execute(search_store.with_vector(sql), {"qvec": vec, "limit": limit, "vec_min": vec_min,
                                                            **plan.bound(found)})
    return [(str(r.item_id), round(float(r.cos), 6)) for r in rows]


def _walk_params():  # type: ignore[no-untyped-def]
    """Search parameters under which every scope is walked (HNSW, iteratively), however small a share it is."""
    from dataclasses import replace

    from lev.core.settings import get_settings
    from lev.library.reads import search_params

    return replace(search_params(get_settings()), exact_scan_max_chunks=0, max_scan_tuples=10**9,
                   walk_tuple_cost=0)


def test_hnsw_path_respects_scope(server, api, user, admin) -> None:
    """The index scan (HNSW; pgvector filters the walk's rows) keeps to the scope: the walk alone (no exact scan
    behind it) finds a folder token's item only, and a whole-library search's both."""
    from lev.auth.policy import Scope
    from lev.embedding.embedder import LocalEmbedder
    from lev.store import search as search_store

    f = user.folder("Birds")
    scoped = api(user.token(write=True, folders=[f]))
    mine = scoped.post("/api/v1/ingest", json={"kind": "text", "text": "Puffins nest in burrows on sea cliffs.",
                                               "auto_transform": False}).json()["user_item_id"]
    outside = api(user.token(write=True)).post("/api/v1/ingest", json={
        "kind": "text", "text": "Puffins dive for sand eels at sea.", "auto_transform": False}).json()["user_item_id"]
    emb = LocalEmbedder()

    async def walk(s, scope: Scope, q: str, limit: int) -> list[str]:  # type: ignore[no-untyped-def]
        plan = await search_store.plan_scope(s, scope, None, limit, "semantic", _walk_params())
        assert plan.ef is not None and plan.fallback is not None  # the HNSW path
        return [i for i, _ in await _nearest(s, scope, plan, emb.embed_query(q), limit, vec_min=0)]

    assert admin.run(lambda s: walk(s, Scope(user.id, frozenset({uuid.UUID(f)}), kb_only=True), "puffins", 10)) \
        == [mine]
    assert {mine, outside} <= set(admin.run(lambda s: walk(s, Scope(user.id, None, kb_only=True), "puffin burrows",
                                                           50)))


def test_a_short_index_scan_gives_way_to_the_exact_scan(server, api, user, admin) -> None:
    """An iterative walk stops at `max_scan_tuples`, so it can leave fewer visible chunks than asked for; the
    statement then answers with the exact scan of the scope (the same rows an exact plan gives), never a short
    list."""
    from dataclasses import replace

    from lev.auth.policy import Scope
    from lev.embedding.embedder import LocalEmbedder
    from lev.store import search as search_store

    c = api(user.token(write=True))
    texts = [f"Field note {i}: the lighthouse keeper counted {i * 7} gannets and a lone skua." for i in range(6)]
    ids = {c.post("/api/v1/ingest", json={"kind": "text", "text": t, "auto_transform": False}).json()["user_item_id"]
           for t in texts}
    scope = Scope(user.id, None, kb_only=True)
    p = _walk_params()
    vec = LocalEmbedder().embed_query("gannets counted at the lighthouse")

    async def go(s):  # type: ignore[no-untyped-def]
        walk = await search_store.plan_scope(s, scope, None, 5, "semantic", p)
        exact = await search_store.plan_scope(s, scope, None, 5, "semantic", replace(p, exact_scan_max_chunks=10**9))
        assert walk.fallback is not None and walk.ef is not None and exact.ef is None and exact.fallback is None
        # a walk that stops after one index tuple leaves at most one chunk, seldom this user's: alone it would come
        # back short
        alone = await _nearest(s, scope, walk, vec, 5, vec_min=0, ef=1, iterative=False)
        short = await _nearest(s, scope, walk, vec, 5, vec_min=5, ef=1, iterative=False)
        return alone, short, await _nearest(s, scope, exact, vec, 5, vec_min=0)

    alone, short, exact = admin.run(go)
    assert len(alone) <= 1
    assert len(exact) == 5 and {i for i, _ in exact} <= ids
    assert short == exact


def test_a_narrow_scope_is_scanned_exactly_when_a_walk_would_leave_too_few(server, api, user, admin) -> None:
    """A scope too small a share of the corpus for a walk bounded by `max_scan_tuples` to be expected to find the
    rows needed is scanned exactly at once (not walked, then scanned)."""
    from dataclasses import replace

    from lev.auth.policy import Scope
    from lev.store import search as search_store

    api(user.token(write=True)).post("/api/v1/ingest", json={"kind": "text", "text": "A lone note on storm petrels.",
                                                             "auto_transform": False})
    scope = Scope(user.id, None, kb_only=True)
    p = _walk_params()

    from sqlalchemy import text

    async def go(s):  # type: ignore[no-untyped-def]
        total = int((await s.execute(text("SELECT n_chunks FROM lev_bm25_stats"))).scalar_one())
        # 10 tuples visited are expected to hold fewer than 10 rows of a scope under all chunks
        narrow = await search_store.plan_scope(s, scope, None, 10, "semantic", replace(p, max_scan_tuples=10))
        walked = await search_store.plan_scope(s, scope, None, 10, "semantic", p)
        return total, narrow, walked

    total, narrow, walked = admin.run(go)
    assert total > 1  # the user's one chunk is not all of the corpus
    assert narrow.ef is None and narrow.exact == "+ 0"
    assert walked.ef is not None


def test_scope_strategies_agree(server, api, user, admin) -> None:
    """Probing the scope per ranked candidate and filtering postings by it first (scanning a term's posting list, or
    reading it per visible content) rank the same chunks, on the bounded fast path (few candidates) and on its
    full-ranking fallback (fewer matches than candidates)."""
    import random
    import uuid
    from dataclasses import replace

    from lev.auth.policy import Scope
    from lev.core.settings import get_settings
    from lev.embedding.embedder import LocalEmbedder
    from lev.library.reads import search_params
    from lev.store import search as search_store
    from tests.stack import new_user

    other = new_user(admin)
    folder = user.folder("Seabirds")
    clients = [api(user.token(write=True, folders=[folder])), api(user.token(write=True)),
               api(other.token(write=True))]
    words = ["gannet", "puffin", "tern", "cormorant", "shag", "kittiwake", "razorbill", "fulmar"]
    rnd = random.Random(3)
    owned: dict[str, set[str]] = {"folder": set(), "user": set(), "other": set()}
    for i in range(30):
        text = f"Colony count {i}: " + " ".join(rnd.choice(words) for _ in range(rnd.randint(5, 40)))
        who = i % 3
        r = clients[who].post("/api/v1/ingest", json={"kind": "text", "text": text, "auto_transform": False})
        assert r.status_code == 200, r.text
        item = r.json()["user_item_id"]
        owned[("folder", "user", "other")[who]].add(item)
        if who == 0:
            owned["user"].add(item)
    scopes = {"folder": Scope(user.id, frozenset({uuid.UUID(folder)}), kb_only=True),
              "user": Scope(user.id, None, kb_only=True), "other": Scope(other.id, None, kb_only=True)}
    emb = LocalEmbedder()
    seen_fast = False
    for q in ("puffin colony", "gannet tern shag", "fulmar"):
        vec = emb.embed_query(q)
        for name, scope in scopes.items():
            for mode in search_store.MODES:
                for candidates, exact_max in ((2, 0), (100, 0), (100, 10**6)):
                    results = []
                    # always probe the scope per candidate / filter first, reading every sel term per visible
                    # content / filter first, scanning every sel term's posting list
                    for probe_share, per_content in ((0.0, 8.0), (2.0, 0.0), (2.0, 1e12)):
                        params = replace(search_params(get_settings()), candidates=candidates,
                                         probe_min_share=probe_share,
                                         exact_scan_max_chunks=exact_max, per_content_factor=per_content)
                        results.append(admin.run(lambda s, sc=scope, m=mode, p=params, qq=q, v=vec: search_store.search(
                            s, sc, query=qq, query_vector=v, mode=m, limit=5, params=p)))
                    probed = results[0]
                    for other in results[1:]:
                        assert [(r["chunk_id"], round(r["score"], 9)) for r in probed] == \
                            [(r["chunk_id"], round(r["score"], 9)) for r in other], (q, name, mode, candidates)
                    assert probed and {r["item_id"] for r in probed} <= owned[name], (q, name, mode)
                    seen_fast |= candidates == 2 and mode != "semantic" and len(probed) >= 2
    assert seen_fast


def test_chunk_embeddings_stay_in_the_row(server, api, user, admin) -> None:
    """A chunk row with its text and tsvector passes the 2 kB TOAST threshold; the vector stays inline (storage
    PLAIN) so distances computed from the heap never fetch it from the TOAST table (migration 0009)."""
    c = api(user.token(write=True))
    text = " ".join(f"Sentence {i} tells how glaciers carve fjords, moraines and cirques over long winters."
                    for i in range(120))
    item = c.post("/api/v1/ingest", json={"kind": "text", "text": text, "auto_transform": False}).json()
    rows = admin.sql("SELECT pg_column_size(c.*) AS row_bytes,"
                     " pg_column_size(c.embedding) - 4 * vector_dims(c.embedding) AS header"
                     " FROM chunks c JOIN user_items i ON i.content_id = c.content_id WHERE i.id = :id",
                     id=item["user_item_id"])
    assert len(rows) >= 2 and all(r.row_bytes > 2032 for r in rows)
    assert {r.header for r in rows} == {8}  # varlena header + dimensions: inline (out of line it reports 4)


def test_the_plans_walk_settings_reach_the_index_scan(admin) -> None:
    """A search's reads run without a transaction: hnsw.ef_search, hnsw.iterative_scan and hnsw.max_scan_tuples are
    set on the connection in one statement, and only when they change; inside a transaction they are local to it."""
    from sqlalchemy import event, text

    from lev.store import db
    from lev.store.search import Plan, use_plan_walk

    sent: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "set_config" in statement:
            sent.append(statement)

    async def show(s) -> tuple[int, str, int]:  # type: ignore[no-untyped-def]
        row = (await s.execute(text("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan'),"
                                    " current_setting('hnsw.max_scan_tuples')"))).one()
        return int(row[0]), row[1], int(row[2])

    async def go() -> tuple[list[tuple[int, str, int]], list[tuple[int, str, int]]]:
        seen, inside = [], []
        async with db.database().read_session() as s:
            for ef, tuples in ((123, 5000), (123, 5000), (250, 5000), (None, 7), (123, 5000), (123, 9000)):
                await use_plan_walk(s, Plan("", 0, "true", "", ef, tuples))
                seen.append(await show(s))
        async with db.database().transaction() as s:
            await use_plan_walk(s, Plan("", 0, "true", "", 77, 3000))
            inside.append(await show(s))
        async with db.database().read_session() as s:
            inside.append(await show(s))  # the transaction's settings ended with it
        return seen, inside

    engine = db.database().engine.sync_engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        seen, inside = admin.run_coro(go())
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert seen == [(123, "relaxed_order", 5000), (123, "relaxed_order", 5000), (250, "relaxed_order", 5000),
                    (250, "relaxed_order", 5000), (123, "relaxed_order", 5000), (123, "relaxed_order", 9000)]
    assert inside[0] == (77, "relaxed_order", 3000)  # None above: an exact scan, the settings left as they were
    assert len(sent) == 5  # one statement per change, none for a repeat or an exact scan


def test_a_query_vector_reaches_postgresql_unchanged(admin) -> None:
    """`with_vector` sends 9 significant digits: the same float4 values as pgvector's own full-precision binding,
    for float32 output (the local model) and float64 input (a hosted embedder) alike."""
    import numpy as np
    from pgvector.sqlalchemy import Vector
    from sqlalchemy import bindparam

    from lev.store.statements import with_vector

    rng = np.random.default_rng(7)
    vectors = [rng.standard_normal(384).astype(np.float32).tolist(), (rng.standard_normal(384) / 20).tolist(),
               [1e-38, -3.4e38, 0.0, 1.0, -1.0, 1e-7, 123456.789] + [0.5] * 377]

    async def same(s, vec: list[float]) -> bool:  # type: ignore[no-untyped-def]
        stmt = with_vector("SELECT CAST(:qvec AS vector) = :exact AS same")
        stmt = stmt.bindparams(bindparam("exact", type_=Vector(384)))
        row = (await s.execute(stmt, {"qvec": vec, "exact": vec})).one()
        return bool(row.same)

    assert all(admin.run(lambda s, v=v: same(s, v)) for v in vectors)
    # No bind cast (`%(qvec)s::VARCHAR`): PostgreSQL must see a `vector` parameter, or a generic plan converts the
    # text once per row it compares (a 1,000-chunk exact scan went from 28 to 76 ms p50 through REST that way).
    from sqlalchemy.dialects.postgresql import psycopg as pg_psycopg

    compiled = with_vector("SELECT CAST(:qvec AS vector)").compile(dialect=pg_psycopg.dialect())
    assert "%(qvec)s AS vector" in str(compiled)


def test_hybrid_keyword_ranks_are_exact_bm25_for_every_candidate(server, api, user, admin) -> None:
    """Each hybrid result's keyword_rank is the chunk's whole BM25 for the query, whether it came in as a keyword
    candidate or only by its vector, and whether the keyword candidates were complete (fewer than `candidates`:
    then a vector-only candidate is looked up for the common terms only) or cut off."""
    import secrets
    from dataclasses import replace

    import numpy as np

    from lev.auth.policy import Scope
    from lev.core.settings import get_settings
    from lev.library.reads import search_params
    from lev.store import search as search_store

    # Five made-up words with document frequencies 4, 5, 6, 9 and 11 in this user's fourteen notes: with prune_df 0
    # the three rarest generate keyword candidates (every note but the last two holds one) and the other two only
    # score (the last two notes hold only those).
    tag = secrets.token_hex(3)
    words = [f"qx{tag}{w}" for w in ("alpha", "bravo", "charli", "delta", "echo")]
    holders = {0: {0, 1, 2, 3}, 1: {4, 5, 6, 7, 8}, 2: {0, 4, 6, 9, 10, 11}, 3: {1, 2, 3, 5, 7, 9, 10, 12, 13},
               4: {0, 1, 2, 3, 4, 6, 8, 10, 11, 12, 13}}
    c = api(user.token(write=True))
    for i in range(14):
        present = [w for k, w in enumerate(words) if i in holders[k]]
        text = f"Field note {i} on seabird colonies along the cliffs. " + " ".join(present * (1 + i % 3))
        assert c.post("/api/v1/ingest", json={"kind": "text", "text": text, "auto_transform": False}).status_code == 200
    query = " ".join(words)
    scope = Scope(user.id, None, kb_only=True)
    base = replace(search_params(get_settings()), prune_df=0.0, keep_rarest=3)
    mine = "c.content_id IN (SELECT content_id FROM user_items WHERE user_id = :u)"
    chunks = {r.id: r for r in admin.sql(f"SELECT c.id, c.text, c.embedding::text AS vec FROM chunks c WHERE {mine}",
                                         u=user.id)}
    sel_ranked = [r[0] for r in admin.sql(
        f"SELECT c.id FROM lev_bm25_query(:q, :k1, :b, 0.0, 3) q JOIN lev_postings p ON p.lexeme = q.lexeme"
        f" JOIN chunks c ON c.id = p.chunk_id WHERE q.sel AND {mine}"
        " GROUP BY c.id ORDER BY sum(q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl)) DESC, c.id",
        q=query, k1=base.k1, b=base.b, u=user.id)]
    assert len(chunks) == 14 and len(sel_ranked) == 12

    def toward(ids: list) -> list[float]:  # a query vector nearest these chunks
        v = np.mean([np.array(chunks[i].vec.strip("[]").split(","), dtype=float) for i in ids], axis=0)
        return (v / np.linalg.norm(v)).tolist()

    def check(results: list[dict]) -> None:
        for r in results:
            exact = admin.sql(
                "SELECT sum(q.idf * p.tf / (p.tf + q.kb0 + q.kb1 * p.dl)) FROM lev_bm25_query(:q, :k1, :b, 0.0, 3) q"
                " JOIN lev_postings p ON p.lexeme = q.lexeme AND p.chunk_id = :c",
                q=query, k1=base.k1, b=base.b, c=r["chunk_id"])[0][0]
            assert exact and r["keyword_rank"] == pytest.approx(exact, rel=1e-9), r["text"]

    # Cut off: 8 keyword candidates of the 12 notes holding a rare word; the vector points at the other 4, which come
    # in by their vectors alone and must still score their rare words.
    behind = sel_ranked[8:]
    cut = admin.run(lambda s: search_store.search(s, scope, query=query, query_vector=toward(behind), mode="hybrid",
                                                  limit=8, params=replace(base, candidates=2)))
    assert len(cut) == 8 and {uuid.UUID(r["chunk_id"]) for r in cut} & set(behind)
    check(cut)
    # Complete: all 12 are keyword candidates; the two notes holding only the common words come in by their vectors.
    only_common = [i for i in chunks if i not in sel_ranked]
    whole = admin.run(lambda s: search_store.search(s, scope, query=query, query_vector=toward(only_common),
                                                    mode="hybrid", limit=50, params=replace(base, candidates=100)))
    assert len(whole) == 14 and {uuid.UUID(r["chunk_id"]) for r in whole} >= set(only_common)
    check(whole)


def test_a_small_scope_reads_only_its_own_postings_of_a_common_term(server, api, admin) -> None:
    """One user's keyword candidates never read another user's postings of a term common in the corpus: the term
    is read per visible content (EXPLAIN ANALYZE counts every posting row the statement touches)."""
    import json
    import secrets

    from sqlalchemy import text

    from lev.auth.policy import Scope
    from lev.core.settings import get_settings
    from lev.library.reads import search_params
    from lev.store import search as search_store
    from tests.stack import new_user

    word = f"kittiwake{secrets.token_hex(3)}"
    big = api(new_user(admin).token(write=True))
    for i in range(40):
        assert big.post("/api/v1/ingest", json={"kind": "text", "text": f"Ledge {i}: {word} nests on the cliff.",
                                                "auto_transform": False}).status_code == 200
    user = new_user(admin)  # its own two items alone
    small = api(user.token(write=True))
    for i in range(2):
        assert small.post("/api/v1/ingest", json={"kind": "text", "text": f"My note {i} saw one {word} today.",
                                                  "auto_transform": False}).status_code == 200
    scope = Scope(user.id, None, kb_only=True)
    params = search_params(get_settings())

    async def explain(s):  # type: ignore[no-untyped-def]
        # A corpus this small fits in a few pages, which PostgreSQL would rather read whole: the test is about
        # the statement's shape, so sequential scans are ruled out for it.
        await s.execute(text("SET LOCAL enable_seqscan = off"))
        plan = await search_store.plan_scope(s, scope, None, 100, "keyword", params)
        sql = "EXPLAIN (ANALYZE, FORMAT JSON) " + search_store._KW_CAND_SQL.format(cand=plan.kw_cand)
        values = {"q": word, "k1": params.k1, "b": params.b, "prune": params.prune_df, "keep": params.keep_rarest,
                  "depth": 100, "over": plan.kw_over, "per_content_df": plan.per_content_df, **plan.params}
        found = (await s.execute(text(search_store._KW_CAND_SQL.format(cand=plan.kw_cand)), values)).all()
        return (await s.execute(text(sql), values)).scalar(), len(found)

    doc, found = admin.run(explain)
    doc = doc if isinstance(doc, list) else json.loads(doc)

    def postings_rows(node: dict) -> int:  # rows read from lev_postings: returned or filtered out, every loop
        own = 0
        if node.get("Relation Name") == "lev_postings":
            own = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        return own + sum(postings_rows(n) for n in node.get("Plans", []))

    # The term's list holds 42 postings; the small user's contents hold fewer than that, of every term. Its two
    # postings of the term are read per content, and a hash join may fetch one row more before it finds its other
    # side empty (a plan PostgreSQL picks on a larger corpus): the statement's reads stay the size of the scope.
    own = admin.sql("SELECT count(*) FROM lev_postings p WHERE p.content_id IN (SELECT content_id FROM user_items "
                    "WHERE user_id = :u)", u=user.id)[0][0]
    assert found == 2 and 2 <= own < 42
    assert 2 <= postings_rows(doc[0]["Plan"]) <= own


def test_connections_plan_their_prepared_statements_once(admin) -> None:
    """With LEV_DB_GENERIC_PLANS (the default) every connection of the pool uses generic plans for its prepared
    statements, whether it is handed out for reads (autocommit) or for a transaction; without it PostgreSQL decides."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from lev.core.settings import Settings
    from lev.store import db

    assert Settings().db_generic_plans is True

    async def modes(generic: bool) -> list[str]:
        engine = create_async_engine(db.database().engine.url, pool_size=2)
        if generic:
            db._plan_once(engine)
        try:
            seen = []
            async with engine.connect() as conn:
                auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
                seen.append((await auto.execute(text("SHOW plan_cache_mode"))).scalar_one())
            async with engine.begin() as conn:
                seen.append((await conn.execute(text("SHOW plan_cache_mode"))).scalar_one())
            return seen
        finally:
            await engine.dispose()

    assert admin.run_coro(modes(True)) == ["force_generic_plan", "force_generic_plan"]
    assert admin.run_coro(modes(False)) == ["auto", "auto"]


def test_a_searchs_sql_text_is_the_same_for_every_user_of_a_scope_shape() -> None:
    """The scope's ids are parameters, not text: every user's searches share one prepared statement (and plan) per
    connection. Parts compiled apart that bind one name to two values are refused, never silently merged."""
    import uuid

    from lev.store import scoped_sql
    from lev.store.scope import Scope

    a, b = (Scope(uuid.uuid4(), None, kb_only=True) for _ in range(2))
    fa, fb = (Scope(uuid.uuid4(), frozenset({uuid.uuid4(), uuid.uuid4()}), kb_only=True, token_id=uuid.uuid4())
              for _ in range(2))
    for make in (scoped_sql.scope_sql, scoped_sql.item_sql):
        for x, y in ((a, b), (fa, fb)):
            sx, sy = make(x, None), make(y, None)
            assert sx.sql == sy.sql and sx.params != sy.params
            assert str(x.user_id) not in sx.sql and x.user_id in sx.params.values()
        assert make(a, None).sql != make(fa, None).sql
    mixed = scoped_sql.Bound("", {"user_id_1": b.user_id})
    with pytest.raises(ValueError, match="two values"):
        scoped_sql.bound_params(scoped_sql.scope_sql(a, None), mixed)
