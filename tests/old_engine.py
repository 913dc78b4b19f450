"""A data directory as the release before issue 49 left it, and what it holds, read the same way before and after.

The old engine is the real old package: pgserver 0.1.4 (PostgreSQL 16.2, pgvector 0.6.2), installed by uv into a
throwaway virtualenv cached under .cache/ and run from there. Lev's schema is brought to that release's last
migration (0021) and a small library is saved by Lev's own ingest (chunks, vectors, postings, the HNSW index
filled by pgvector 0.6.2). `facts` reads counts, vectors, indexes and search answers; the tests compare them
before and after the new engine opens the directory.

    python -m tests.old_engine build DATA_DIR      # prints the facts (JSON) and leaves the old server stopped
    python -m tests.old_engine facts DATA_DIR      # the facts on the engine Lev starts for DATA_DIR now

Each runs in a process of its own: Lev's store keeps one engine per process.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OLD_PACKAGE = "pgserver==0.1.4"
OLD_HEAD = "0021"  # the last migration of the release that ran on pgserver
OWNER = "old-engine@example.com"
QUERIES = ("how do glaciers carve valleys", "sourdough bread fermentation", "orbital mechanics of satellites")
TOPICS = {
    "Glaciers": "Glaciers carve U-shaped valleys as moving ice grinds bedrock, leaving moraines and cirques behind.",
    "Bread": "Sourdough bread rises through fermentation by wild yeast and lactic acid bacteria in the starter.",
    "Orbits": "Satellites stay in orbit because their sideways speed balances the pull of the planet's gravity.",
    "Bees": "Honey bees dance to tell their hive mates the direction and distance of flowers full of nectar.",
    "Tides": "Ocean tides follow the moon: its gravity raises a bulge of water on the near and far sides of Earth.",
    "Volcanoes": "Volcanoes erupt when magma rich in dissolved gas rises through cracks in the crust.",
}


def old_python() -> str:
    """The interpreter of a virtualenv holding only the old package (made once, under .cache/)."""
    venv = ROOT / ".cache" / "pgserver-0.1.4"
    python = venv / "bin" / "python"
    if not (venv / ".ready").exists():
        uv = str(Path(sys.executable).parent / "uv")
        subprocess.run([uv, "venv", "-q", "--allow-existing", "--python", sys.executable, str(venv)], check=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", str(python), OLD_PACKAGE], check=True)
        (venv / ".ready").touch()
    return str(python)


_START_OLD = """
import sys, pgserver
server = pgserver.get_server(sys.argv[1], cleanup_mode=None)
if "(1 row)" not in server.psql("SELECT 1 FROM pg_database WHERE datname = 'lev';"):
    server.psql("CREATE DATABASE lev;")
print(server.get_uri("lev"))
"""


def start_old(data_dir: Path) -> str:
    """Start the old package's server on `data_dir/pg` (left running) and return a SQLAlchemy URL."""
    (data_dir / "pg").mkdir(parents=True, exist_ok=True)
    out = subprocess.run([old_python(), "-c", _START_OLD, str(data_dir / "pg")], check=True, capture_output=True,
                         text=True, timeout=120).stdout.strip().splitlines()[-1]
    return out.replace("postgresql://", "postgresql+psycopg://", 1)


def stop_server(data_dir: Path, timeout: float = 60) -> None:
    """A fast shutdown of the data directory's postmaster, waited for."""
    pid_file = data_dir / "pg" / "postmaster.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split("\n", 1)[0])
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while pid_file.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"PostgreSQL {pid} did not stop")
        time.sleep(0.1)


def _migrate_to(url: str, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    from lev.store import db

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).parent / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    command.upgrade(cfg, revision)


def _text(topic: str, n: int) -> str:
    lead = TOPICS[topic]
    return "\n\n".join(f"{lead} Note {i} of {n} on {topic.lower()}: " + " ".join([lead] * 6) for i in range(n))


async def _fill(url: str, redis_url: str) -> None:
    """A user, a folder and twelve items saved through Lev's ingest (chunks embedded inline)."""
    from arq import create_pool
    from arq.connections import RedisSettings
    from redis.asyncio import Redis
    from sqlalchemy import text

    from lev.auth.policy import Principal
    from lev.core.settings import get_settings
    from lev.embedding.embedder import build_embedder
    from lev.embedding.pool import QueryBatcher
    from lev.ingest.request import IngestRequest
    from lev.ingest.service import ingest
    from lev.library.reads import create_folder
    from lev.plumbing.deps import Deps
    from lev.providers.transcriber import transcriber_from
    from lev.runtime import QUEUE, get_object_store
    from lev.store import db

    settings = get_settings()
    database = db.init_engine(url, pool_size=2)
    emb = build_embedder(settings)
    deps = Deps(settings=settings, db=database, queue=await create_pool(RedisSettings.from_dsn(redis_url),
                                                                         default_queue_name=QUEUE),
                redis=Redis.from_url(redis_url), objects=get_object_store(), embedder=emb,
                queries=QueryBatcher(emb.embed_queries), transcriber=transcriber_from(settings))
    async with database.transaction() as s:
        user_id = uuid.uuid4()  # the users table as 0021 left it (the store's code writes today's columns)
        await s.execute(text("INSERT INTO users (id, email, tier) VALUES (:id, :email, 'pro')"),
                        {"id": user_id, "email": OWNER})
        folder = uuid.UUID(str((await create_folder(s, user_id, "Science"))["id"]))
    me = Principal(None, user_id, "old", frozenset({"read", "write"}), True, frozenset(), False, 0, "pro")
    for i, topic in enumerate(sorted(TOPICS)):
        for copy in range(2):
            await ingest(deps, me, IngestRequest(kind="text", text=_text(topic, 3 + copy), title=f"{topic} {copy}",
                                                 folder_id=folder if i % 2 else None, in_kb=copy == 0 or i != 3))
    await deps.queue.aclose()
    await deps.redis.aclose()
    await db.dispose_engine()


async def _facts(url: str) -> dict[str, Any]:
    """What the directory holds and answers: row counts, every vector (a digest of their float4 bytes), the indexes
    and their validity, the HNSW walk's answers and Lev's own answers in every mode for QUERIES."""
    import numpy as np
    from sqlalchemy import text

    from lev.core.settings import get_settings
    from lev.embedding.embedder import build_embedder
    from lev.library.reads import search_params
    from lev.store import db, search
    from lev.store.scope import Scope

    database = db.init_engine(url, pool_size=2)
    settings = get_settings()
    out: dict[str, Any] = {}
    async with database.transaction() as s:
        async def one(sql: str) -> Any:
            return (await s.execute(text(sql))).scalar_one()

        out["server"] = await one("SHOW server_version")
        out["pgvector"] = await one("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        out["migration"] = await one("SELECT version_num FROM alembic_version")
        out["counts"] = {t: await one(f"SELECT count(*) FROM {t}") for t in (
            "users", "folders", "user_items", "item_folders", "contents", "chunks", "chunk_locations",
            "lev_postings")}
        out["vectors"] = await one("SELECT count(embedding) FROM chunks")
        rows = (await s.execute(text("SELECT id, embedding::real[] FROM chunks ORDER BY id"))).all()
        digest = hashlib.sha256()
        for chunk_id, vec in rows:
            digest.update(str(chunk_id).encode() + np.asarray(vec, dtype=np.float32).tobytes())
        out["vector_digest"] = digest.hexdigest()
        out["indexes"] = [list(r) for r in (await s.execute(text(
            "SELECT i.indexrelid::regclass::text, x.indisvalid, x.indisready, pg_get_indexdef(i.indexrelid)"
            "  FROM pg_index x JOIN pg_stat_user_indexes i ON i.indexrelid = x.indexrelid"
            " ORDER BY 1"))).all()]
        user_id = (await s.execute(text("SELECT id FROM users WHERE email = :e"), {"e": OWNER})).scalar_one()
    emb = build_embedder(settings)
    scope = Scope(user_id, None, True)
    out["walk"], out["search"] = {}, {}
    for q in QUERIES:
        qvec = emb.embed_queries([q])[0]
        async with database.transaction() as s:
            await s.execute(text("SET LOCAL enable_seqscan = off"))
            plan = "\n".join(r[0] for r in (await s.execute(search.with_vector(
                "EXPLAIN SELECT id FROM chunks ORDER BY embedding <=> CAST(:qvec AS vector) LIMIT 10"),
                {"qvec": qvec})).all())
            assert "chunks_embedding_hnsw" in plan, plan
            out["walk"][q] = [str(r[0]) for r in (await s.execute(search.with_vector(
                "SELECT id FROM chunks ORDER BY embedding <=> CAST(:qvec AS vector) LIMIT 10"), {"qvec": qvec}))]
        for mode in ("keyword", "semantic", "hybrid"):  # a library this small is scanned exactly: no index settings
            async with database.transaction() as s:
                hits = await search.search(s, scope, query=q, query_vector=qvec, mode=mode, limit=8,
                                           params=search_params(settings))
            out["search"][f"{mode}: {q}"] = [(h["chunk_id"], round(h["score"], 6)) for h in hits]
    await db.dispose_engine()
    return out


# Today's ingest writes columns and tables later migrations add; theirs are written IF NOT EXISTS, so they are run
# ahead on the old engine before the library is saved (and again, doing nothing, when the directory is upgraded).
AHEAD = ("0025_document_locations", "0026_source_files", "0027_tags_reading")


def _ahead(url: str) -> None:
    import importlib.util

    from alembic.migration import MigrationContext
    from alembic.operations import Operations
    from sqlalchemy import create_engine

    from lev.store import db

    engine = create_engine(url)
    try:
        with engine.begin() as conn, Operations.context(MigrationContext.configure(conn)):
            for name in AHEAD:
                spec = importlib.util.spec_from_file_location(
                    name, Path(db.__file__).parent / "migrations" / "versions" / f"{name}.py")
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                module.upgrade()
    finally:
        engine.dispose()


def build(data_dir: Path) -> dict[str, Any]:
    """The old engine's data directory with a library in it (its server stopped at the end), and its facts."""
    from lev.embedded import ensure_redis, stop_redis

    url = start_old(data_dir)
    try:
        _migrate_to(url, OLD_HEAD)
        _ahead(url)
        asyncio.run(_fill(url, ensure_redis(data_dir)))
        stop_redis(data_dir)
        return asyncio.run(_facts(url))
    finally:
        stop_server(data_dir)


def facts_now(data_dir: Path) -> dict[str, Any]:
    """The facts on the engine Lev itself starts for the data directory (its migrations applied first)."""
    from lev.embedded import ensure_postgres
    from lev.store import db

    url = ensure_postgres(data_dir)
    db.migrate(url)
    return asyncio.run(_facts(url))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    command, where = sys.argv[1], Path(sys.argv[2]).resolve()
    os.environ["LEV_DATA_DIR"] = str(where)
    result = build(where) if command == "build" else facts_now(where)
    print(json.dumps(result, default=str))
