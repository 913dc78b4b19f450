"""SciFact helpers the quality and latency benchmarks share: the data, ingest through the API, in-process search."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.common import Lev
from lev.core.settings import get_settings
from lev.library.reads import search_params
from lev.store import search as search_store
from lev.store.scope import Scope

INGEST_CLIENTS = 3


def load_data(data: Path) -> tuple[dict[str, tuple[str, str]], dict[str, str], dict[str, dict[str, dict[str, int]]]]:
    """SciFact as BEIR ships it: corpus {id: (title, text)}, queries {id: text}, qrels {split: {qid: {doc: rel}}}."""
    corpus = {}
    with open(data / "corpus.jsonl") as f:
        for line in f:
            d = json.loads(line)
            corpus[d["_id"]] = (d.get("title") or "", d.get("text") or "")
    queries = {}
    with open(data / "queries.jsonl") as f:
        for line in f:
            d = json.loads(line)
            queries[d["_id"]] = d["text"]
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    for split in ("train", "test"):
        qr: dict[str, dict[str, int]] = {}
        with open(data / "qrels" / f"{split}.tsv") as f:
            next(f)
            for line in f:
                q, d, s = line.rstrip("\n").split("\t")
                qr.setdefault(q, {})[d] = int(s)
        qrels[split] = qr
    return corpus, queries, qrels


def ingest_docs(lev: Lev, docs: dict[str, tuple[str, str]], clients: int = INGEST_CLIENTS) -> tuple[dict[str, str],
                                                                                                     float]:
    """POST every doc as kind text (title, text, auto_transform false) from `clients` threads, each with its
    own keep-alive client. Returns ({user_item_id: doc_id}, wall seconds)."""
    local = threading.local()
    clients_made: list[httpx.Client] = []
    lock = threading.Lock()

    def client() -> httpx.Client:
        c = getattr(local, "client", None)
        if c is None:
            c = httpx.Client(base_url=lev.url, headers=lev.headers(), timeout=300)
            local.client = c
            with lock:
                clients_made.append(c)
        return c

    def one(item: tuple[str, tuple[str, str]]) -> tuple[str, str]:
        doc_id, (title, text) = item
        body: dict[str, Any] = {"kind": "text", "text": text if text.strip() else title, "auto_transform": False}
        if title.strip():
            body["title"] = title
        r = client().post("/api/v1/ingest", json=body)
        if r.status_code != 200 or r.json().get("status") != "ready":
            raise RuntimeError(f"ingest of doc {doc_id} failed: {r.status_code} {r.text[:300]}")
        return r.json()["user_item_id"], doc_id

    t0 = time.perf_counter()
    try:
        with ThreadPoolExecutor(clients) as pool:
            pairs = list(pool.map(one, docs.items()))
    finally:
        for c in clients_made:
            c.close()
    return dict(pairs), time.perf_counter() - t0


def store_search(lev: Lev, query: str, vector: list[float] | None, mode: str, limit: int) -> list[dict[str, Any]]:
    """The server's search SQL (store.search.search with lev.library.reads.search_params()), run in-process."""
    scope = Scope(lev.user_id, None, kb_only=True)  # what the bench token (whole library, kb_only) sees
    return lev.admin.run(lambda s: search_store.search(s, scope, query=query, query_vector=vector, mode=mode,
                                                       limit=limit, params=search_params(get_settings())))
