"""Ingest throughput: chunks per second of text ingest through the API beside the raw embedder, one web page
ingest from a loopback server, and chunking one megabyte of prose (once a test's wall-clock budget: 4 s)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench.common import cleanup, pct, start_lev
from bench.corpus import documents

N_DOCS = 300
THREADS = 2


def raw_embedder(docs: list[tuple[str, str]]) -> tuple[int, float]:
    """Chunk and embed the documents in-process: (chunks, seconds spent embedding)."""
    from lev.embedding.embedder import LocalEmbedder
    from lev.ingest.chunking import chunk_text, embed_input

    emb = LocalEmbedder()
    emb.embed(["warm up"])
    inputs = [embed_input(t, c) for t, x in docs for c in chunk_text(x, t)]
    started = time.perf_counter()
    emb.embed(inputs)
    return len(inputs), time.perf_counter() - started


def chunk_one_megabyte() -> tuple[int, float]:
    """(chunks, seconds) of chunking 1 MB of prose with the real tokenizer, loaded beforehand."""
    from lev.embedding.minilm import tokenizer
    from lev.ingest.chunking import chunk_text
    from tests.ingest.test_chunking import prose

    text = prose(1_000_000, seed=5)
    tokenizer()
    started = time.perf_counter()
    chunks = chunk_text(text, "A title")
    return len(chunks), time.perf_counter() - started


def main() -> str:
    docs = documents(N_DOCS)
    lev = start_lev()
    try:
        client = httpx.Client(base_url=lev.url, headers=lev.headers(), timeout=120)
        client.post("/api/v1/ingest", json={"kind": "text", "text": "warm up the server", "auto_transform": False})

        def ingest(doc: tuple[str, str]) -> None:
            r = client.post("/api/v1/ingest", json={"kind": "text", "title": doc[0], "text": doc[1],
                                                     "auto_transform": False})
            r.raise_for_status()

        started = time.perf_counter()
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(ingest, docs))
        wall = time.perf_counter() - started
        chunks = int(lev.admin.sql("SELECT count(*) FROM chunks")[0][0]) - 1
        n_raw, raw_s = raw_embedder(docs)
        n_mb, mb_s = chunk_one_megabyte()

        from tests.sites import Site

        site = Site()
        page_ms = []
        for i in range(7):
            t = time.perf_counter()
            r = client.post("/api/v1/ingest", json={"kind": "url", "url": f"{site.url}/volcano?copy={i}",
                                                     "auto_transform": False})
            page_ms.append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
        site.close()
    finally:
        cleanup(lev)
    api_rate = chunks / wall
    raw_rate = n_raw / raw_s
    ratio = api_rate / raw_rate
    p = pct(page_ms[1:])
    return (
        f"{N_DOCS} SciFact documents (title + abstract) ingested as `kind: text` through `POST /api/v1/ingest` "
        f"with {THREADS} client threads, against the same documents chunked and embedded in one process "
        f"(all-MiniLM-L6-v2, batch 32).\n\n"
        "| measure | value |\n| --- | --- |\n"
        f"| end-to-end text ingest | {api_rate:.1f} chunks/s ({chunks} chunks in {wall:.1f} s) |\n"
        f"| raw embedder, same chunks | {raw_rate:.1f} chunks/s ({n_raw} chunks in {raw_s:.1f} s) |\n"
        f"| ratio (target >= 70%) | {ratio:.0%} — {'holds' if ratio >= 0.7 else 'missed'} |\n"
        f"| one web page from a loopback server (fetch, extract, chunk, embed, store), p50 / p95 / p99 ms "
        f"of 6 | {p['p50']:.0f} / {p['p95']:.0f} / {p['p99']:.0f} |\n"
        f"| chunking 1 MB of prose (target < 4 s) | {mb_s:.2f} s ({n_mb} chunks) — "
        f"{'holds' if mb_s < 4.0 else 'missed'} |\n"
    )
