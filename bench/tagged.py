"""Issue 50: what narrowing a search by tag costs, on bench/filtered.py's generated library (100,000 distinct SciFact
chunks with real MiniLM vectors, about 41,700 items of one user, folders holding about 0.5 %, 5 % and 50 % of the
chunks).

The same items are tagged as the folders hold (`t/0.5`, `t/5`, `t/50`), so each tag narrowing is measured beside the
folder narrowing of the very same items; and two narrowings folders cannot make: the parent `t` (every item of the
three, about 52 % of the chunks, found through the tags nested in it) and two tags ANDed (`t/5` and `t/50`: the items
in both, about 2.5 %). Each SciFact test claim is searched unfiltered and in every scope, semantic and hybrid,
limit 10, the order of the scopes rotated per claim; then recall@10 against an exact scan of the same scope
(semantic: cosine over the stored float32 vectors, outside the engine; hybrid: Lev's search with its vector side
scanned exactly).

    python -m bench.run tagged              # builds the corpus and the database once (under /tmp), then measures
    LEV_BENCH_FILTERED_CHUNKS=20000         # a smaller library
    LEV_BENCH_FILTERED_CLAIMS=150           # fewer claims

The goal (issue 50): each narrowing's p95 at most 1.2x the unfiltered search's, recall@10 >= 0.98, every answer full.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text

from bench.common import commit, machine, pct
from bench.filtered import CHUNKS, CLAIMS, DATA, WARM, corpus
from bench.filtered_worker import load

MODES = ("semantic", "hybrid")
TAGS = {"0.005": "t/0.5", "0.05": "t/5", "0.5": "t/50"}


def scopes_of(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each scope's label, Lev filter (as keyword arguments of `Filters`) and item ids."""
    folders = meta["folders"]
    items = {k: set(f["items"]) for k, f in folders.items()}
    out: dict[str, dict[str, Any]] = {"none": {"label": "unfiltered", "filters": None,
                                               "items": {i[0] for i in meta["items"]}}}
    for k, f in folders.items():
        out[f"folder {k}"] = {"label": f"folder, {float(k) * 100:g} %", "filters": {"folder_id": f["id"]},
                              "items": items[k]}
    for k, tag in TAGS.items():
        out[f"tag {k}"] = {"label": f"tag `{tag}`, {float(k) * 100:g} %", "filters": {"tags": (tag,)},
                           "items": items[k]}
    out["parent"] = {"label": "tag `t` (its nested tags)", "filters": {"tags": ("t",)},
                     "items": set().union(*items.values())}
    out["and"] = {"label": "tags `t/5` and `t/50`", "filters": {"tags": ("t/5", "t/50")},
                  "items": items["0.05"] & items["0.5"]}
    return out


async def tag_library(database: Any, meta: dict[str, Any]) -> None:
    """The folders' items tagged alike, through Lev's own tag writes (`store.tags`)."""
    from lev.store import tags as tag_store

    user = uuid.UUID(meta["user_id"])
    t = time.perf_counter()
    async with database.transaction() as s:
        ids = await tag_store.ensure(s, user, list(TAGS.values()))
        for k, tag in TAGS.items():
            tag_id = ids[tag_store.key_of(tag)]
            await s.execute(text("INSERT INTO item_tags (item_id, tag_id) SELECT unnest(CAST(:i AS uuid[])), :t"
                                 " ON CONFLICT DO NOTHING"), {"i": meta["folders"][k]["items"], "t": tag_id})
        tagged = sorted({uuid.UUID(i) for f in meta["folders"].values() for i in f["items"]})
        await tag_store.refresh_keys(s, tagged)
    async with database.engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.exec_driver_sql("VACUUM ANALYZE user_items")
        await conn.exec_driver_sql("VACUUM ANALYZE item_tags")
    print(f"tagged in {time.perf_counter() - t:.0f} s", file=sys.stderr)


def truths(corpus_dir: Path, meta: dict[str, Any], scopes: dict[str, dict[str, Any]]) -> dict[str, list[list[str]]]:
    """The exact nearest 10 chunks of every claim in every scope (cosine over the stored float32 vectors)."""
    vectors = np.load(corpus_dir / "vectors.npy")
    queries = np.load(corpus_dir / "queries.npy")
    ids = np.asarray(meta["chunk_ids"])
    where = {item_id: (first, n) for item_id, _, _, first, n in meta["items"]}
    out: dict[str, list[list[str]]] = {}
    for k, scope in scopes.items():
        mask = np.zeros(len(ids), dtype=bool)
        for item_id in scope["items"]:
            f, n = where[item_id]
            mask[f:f + n] = True
        scope["chunks"] = int(mask.sum())
        top = np.argsort(-(queries @ vectors[mask].T), axis=1)[:, :10]
        out[k] = [list(ids[mask][row]) for row in top]
    return out


def load_avg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(meta: dict[str, Any], corpus_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]], str]:
    from lev.core.settings import get_settings
    from lev.embedded import ensure_postgres
    from lev.library.reads import search_params
    from lev.store import db, search
    from lev.store.filters import Filters
    from lev.store.scope import Scope

    data = DATA / "new"
    data.mkdir(parents=True, exist_ok=True)
    url = ensure_postgres(data)
    db.migrate(url)
    load(url, corpus_dir, data / "loaded")
    loop = asyncio.new_event_loop()
    database = db.init_engine(url, pool_size=2)
    if not (data / "tagged").exists():
        loop.run_until_complete(tag_library(database, meta))
        (data / "tagged").write_text("tagged\n")
    params = search_params(get_settings())
    exact = replace(params, exact_scan_max_chunks=10**9)
    scope = Scope(uuid.UUID(meta["user_id"]), None, True)
    scopes = scopes_of(meta)
    truth = truths(corpus_dir, meta, scopes)
    filters = {k: None if s["filters"] is None else Filters(**{
        key: uuid.UUID(v) if key == "folder_id" else v for key, v in s["filters"].items()}) for k, s in scopes.items()}
    queries = np.load(corpus_dir / "queries.npy").tolist()
    claims = min(CLAIMS, len(meta["claims"]))

    async def one(mode: str, k: str, i: int, is_exact: bool) -> tuple[float, list[str]]:
        t = time.perf_counter()
        async with database.read_session() as s:
            hits = await search.search(s, scope, query=meta["claims"][i], query_vector=queries[i], mode=mode,
                                       limit=10, params=exact if is_exact else params, filters=filters[k])
        return (time.perf_counter() - t) * 1000, [h["chunk_id"] for h in hits]

    async def engine() -> str:
        async with database.read_session() as s:
            row = (await s.execute(text("SELECT current_setting('server_version'), (SELECT extversion FROM"
                                        " pg_extension WHERE extname = 'vector')"))).one()
        return f"PostgreSQL {row[0]}, pgvector {row[1]}"

    names = list(scopes)
    out: dict[str, Any] = {"claims": claims}
    for mode in MODES:
        ms: dict[str, list[float]] = {k: [] for k in names}
        recall: dict[str, list[float]] = {k: [] for k in names}
        short = dict.fromkeys(names, 0)
        loads = [load_avg()]
        for i in range(min(WARM, claims)):
            for k in names:
                loop.run_until_complete(one(mode, k, i, False))
        for i in range(claims):
            for k in names[i % len(names):] + names[:i % len(names)]:
                took, got = loop.run_until_complete(one(mode, k, i, False))
                ms[k].append(took)
                short[k] += len(got) < len(truth[k][i])
                if mode == "semantic":
                    wanted = truth[k][i]
                elif k != "none" or i % 5 == 0:  # an exact hybrid search of the whole library takes seconds
                    wanted = loop.run_until_complete(one(mode, k, i, True))[1]
                else:
                    continue
                recall[k].append(len(set(got) & set(wanted)) / max(len(wanted), 1))
            if i % 50 == 49:
                loads.append(load_avg())
                print(f"{mode}: {i + 1} claims, load {loads[-1]}", file=sys.stderr)
        out[mode] = {"load": loads, **{k: {**pct(ms[k]), "recall": float(np.mean(recall[k])), "short": short[k]}
                                       for k in names}}
    name = loop.run_until_complete(engine())
    loop.run_until_complete(db.dispose_engine())
    return out, scopes, name


def table(meta: dict[str, Any], scopes: dict[str, dict[str, Any]], engine: str, result: dict[str, Any]) -> str:
    lines = [f"{engine}; {len(meta['texts']):,} chunks in {len(meta['items']):,} items; {result['claims']} SciFact "
             "test claims, limit 10, in process. p50 / p95 ms; x = p95 over the unfiltered p95; recall@10 against "
             "an exact scan of the same scope (semantic: cosine over the stored float32 vectors, computed outside "
             "the engine; hybrid: Lev's search with its vector side scanned exactly, unfiltered on every fifth "
             "claim); short = answers with fewer than 10 hits.", "",
             "| mode | scope | chunks | p50 | p95 | x | recall@10 | short |", "| --- | --- | --- | --- | --- | --- | "
             "--- | --- |"]
    for mode in MODES:
        rows = result[mode]
        for k, s in scopes.items():
            r = rows[k]
            lines.append(f"| {mode} | {s['label']} | {s['chunks']:,} | {r['p50']:.1f} | {r['p95']:.1f} | "
                         f"{r['p95'] / rows['none']['p95']:.2f} | {r['recall']:.3f} | {r['short']} |")
    lines.append("")
    for mode in MODES:
        lines.append(f"- {mode}: load average (1, 5, 15 min) while measured: {' -> '.join(result[mode]['load'])}")
    return "\n".join(lines)


def main() -> str:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    t = time.perf_counter()
    corpus_dir = corpus()
    meta = json.loads((corpus_dir / "corpus.json").read_text())
    print(f"corpus of {CHUNKS:,} chunks ready in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    result, scopes, engine = measure(meta, corpus_dir)
    (DATA / "tagged.json").write_text(json.dumps(result))
    report = f"{machine()}; commit {commit()}\n\n" + table(meta, scopes, engine, result)
    print(report)
    return report


if __name__ == "__main__":
    main()
