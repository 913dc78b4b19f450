"""One engine's side of bench/filtered.py: run by that checkout's own interpreter with the checkout first on
`sys.path` (this file imports only `lev` and third-party packages, so the old commit's code runs it as well as
this one's), on a data directory of its own. It loads the generated library once (the same rows on both sides),
then answers one JSON command a line on stdin with one JSON line on stdout:

    {"op": "search", "mode": "semantic", "scope": "0.05", "i": 7, "exact": false}
      -> {"ms": 12.3, "ids": [...], "scores": [...]}
    {"op": "engine"} -> {"engine": "PostgreSQL 18.4, pgvector 0.8.5"}

Timing is Lev's own search statement in process (`lev.store.search.search`, the statement the API runs, with the
read session it opens), as the old bench/filtered.py timed it. `exact` searches with every scope scanned exactly
(`exact_scan_max_chunks` above the library's size): the truth recall is measured against.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np


def load(url: str, corpus: Path, marker: Path) -> dict[str, Any]:
    """COPY the library into a fresh database (once: the marker says it is there), then build the HNSW index."""
    import psycopg
    from pgvector.psycopg import register_vector

    meta = json.loads((corpus / "corpus.json").read_text())
    if marker.exists():
        return meta
    vectors = np.load(corpus / "vectors.npy")
    plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    t = time.perf_counter()
    with psycopg.connect(plain) as conn:  # one transaction: a load cut short leaves nothing
        register_vector(conn)
        conn.execute("INSERT INTO users (id, email, tier) VALUES (%s, 'filtered@example.com', 'pro')",
                     (meta["user_id"],))
        conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
        with conn.cursor() as cur:
            with cur.copy("COPY contents (id, kind, title, text) FROM STDIN") as cp:
                for _, content_id, title, first, n in meta["items"]:
                    cp.write_row((content_id, "text", title, "\n\n".join(meta["texts"][first:first + n])))
            with cur.copy("COPY user_items (id, user_id, content_id, kind, title) FROM STDIN") as cp:
                for item_id, content_id, title, _, _ in meta["items"]:
                    cp.write_row((item_id, meta["user_id"], content_id, "text", title))
            rows = [(uuid.UUID(meta["chunk_ids"][first + k]), uuid.UUID(content_id), k, title,
                     meta["texts"][first + k], vectors[first + k])
                    for _, content_id, title, first, n in meta["items"] for k in range(n)]
            for i in range(0, len(rows), 10_000):  # the BM25 triggers run per statement, as in production
                with cur.copy("COPY chunks (id, content_id, ord, title, text, embedding) FROM STDIN (FORMAT BINARY)"
                              ) as cp:
                    cp.set_types(["uuid", "uuid", "int4", "text", "text", "vector"])
                    for r in rows[i:i + 10_000]:
                        cp.write_row(r)
            for share, folder in meta["folders"].items():
                cur.execute("INSERT INTO folders (id, user_id, name) VALUES (%s, %s, %s)",
                            (folder["id"], meta["user_id"], share))
                cur.executemany("INSERT INTO item_folders (item_id, folder_id) VALUES (%s, %s)",
                                [(item_id, folder["id"]) for item_id in folder["items"]])
        conn.commit()
        conn.autocommit = True
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)")
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")
    marker.write_text(f"loaded in {time.perf_counter() - t:.0f} s\n")
    return meta


def main() -> None:
    from sqlalchemy import text

    from lev.core.settings import get_settings
    from lev.embedded import ensure_postgres
    from lev.library.reads import search_params
    from lev.store import db, search
    from lev.store.filters import Filters
    from lev.store.scope import Scope

    out, sys.stdout = sys.stdout, sys.stderr  # the answers alone on stdout
    data, corpus = Path(sys.argv[1]), Path(sys.argv[2])
    data.mkdir(parents=True, exist_ok=True)
    url = ensure_postgres(data)
    db.migrate(url)
    meta = load(url, corpus, data / "loaded")
    queries = np.load(corpus / "queries.npy").tolist()
    claims = meta["claims"]
    loop = asyncio.new_event_loop()
    settings = get_settings()
    # planned as `lev serve` plans them: a prepared statement's generic plan, when the settings say so (the default)
    database = db.init_engine(url, pool_size=2, generic_plans=settings.db_generic_plans)
    params = search_params(settings)
    exact = replace(params, exact_scan_max_chunks=10**9)
    scope = Scope(uuid.UUID(meta["user_id"]), None, True)
    scopes: dict[str, Any] = {"none": None, **{
        share: Filters(folder_id=uuid.UUID(f["id"])) for share, f in meta["folders"].items()}}

    async def run(cmd: dict[str, Any]) -> dict[str, Any]:
        if cmd["op"] == "engine":
            async with database.read_session() as s:
                row = (await s.execute(text(
                    "SELECT current_setting('server_version'), (SELECT extversion FROM pg_extension"
                    " WHERE extname = 'vector')"))).one()
            return {"engine": f"PostgreSQL {row[0]}, pgvector {row[1]}"}
        i = cmd["i"]
        t = time.perf_counter()
        async with database.read_session() as s:
            hits = await search.search(s, scope, query=claims[i], query_vector=queries[i], mode=cmd["mode"],
                                       limit=10, params=exact if cmd["exact"] else params,
                                       filters=scopes[cmd["scope"]])
        ms = (time.perf_counter() - t) * 1000
        return {"ms": ms, "ids": [h["chunk_id"] for h in hits], "scores": [h["score"] for h in hits]}

    print(json.dumps({"ready": True}), file=out, flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(loop.run_until_complete(run(json.loads(line)))), file=out, flush=True)
    loop.run_until_complete(db.dispose_engine())


if __name__ == "__main__":
    main()
