"""Query work never waits for ingest work: the API process embeds ingested text in a low-priority child process,
and its searches embed their queries on their own thread, so a search answers while an ingest's embedding cannot
move at all (its process stopped with SIGSTOP). Query embeddings that arrive together are embedded together."""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor

import psutil

from lev.embedding.embedder import LocalEmbedder
from lev.embedding.pool import QueryBatcher
from tests.stack import Api, LiveServer, User

BEES = "Honeybees communicate the direction of flowers with a waggle dance inside the hive."


def _ingest_processes(server: LiveServer) -> list[psutil.Process]:
    assert server.proc is not None
    return [c for c in psutil.Process(server.proc.pid).children()
            if "lev.embedding.child" in " ".join(c.cmdline())]


def test_searches_answer_while_the_ingest_embedding_process_is_stopped(server: LiveServer, user: User) -> None:
    api = Api(server.url, user.token(write=True))
    assert api.post("/api/v1/ingest", json={"kind": "text", "text": "warm the embedding process"}).status_code == 200
    children = _ingest_processes(server)
    assert len(children) == 1
    child = children[0]
    parent_nice = psutil.Process(server.proc.pid).nice()  # type: ignore[union-attr]
    threads = [t.id for t in child.threads()]
    assert len(threads) > 1  # ONNX Runtime's pool is up: every one of its threads runs at the lower CPU priority
    assert all(os.getpriority(os.PRIO_PROCESS, tid) > parent_nice for tid in threads)

    child.suspend()
    try:
        with ThreadPoolExecutor(1) as pool:
            ingest = pool.submit(api.post, "/api/v1/ingest", json={"kind": "text", "text": BEES})
            for _ in range(3):
                for mode in ("hybrid", "semantic"):  # both embed the query
                    r = api.get("/api/v1/search", params={"q": "how do insects talk", "mode": mode})
                    assert r.status_code == 200, r.text
            assert not ingest.done()  # its embedding cannot move; the searches did not wait for it
            child.resume()
            answer = ingest.result(120)
    finally:
        child.resume()
    assert answer.status_code == 200 and answer.json()["status"] == "ready"  # the contract: ready on return
    hits = api.get("/api/v1/search", params={"q": "waggle dance direction of flowers", "mode": "semantic"}).json()
    assert hits["results"][0]["text"].startswith("Honeybees")


def test_a_killed_ingest_embedding_process_is_replaced(server: LiveServer, user: User) -> None:
    api = Api(server.url, user.token(write=True))
    assert api.post("/api/v1/ingest", json={"kind": "text", "text": "start it"}).status_code == 200
    old = _ingest_processes(server)[0]
    old.kill()
    # it stays a zombie until the server reaps it at the next batch: wait for it to be dead, not gone
    for _ in range(100):
        try:
            if old.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    r = api.post("/api/v1/ingest", json={"kind": "text", "text": "after the kill"})
    assert r.status_code == 200 and r.json()["status"] == "ready"
    assert [p.pid for p in _ingest_processes(server)] != [old.pid]


def test_both_processes_embed_with_onnx_runtime_and_without_torch(server: LiveServer, user: User) -> None:
    """The API process (queries) and its ingest process (batches) both run the bundled ONNX model: torch is
    mapped into neither (tests/embedding/test_no_torch.py shows they never even try to import it)."""
    api = Api(server.url, user.token(write=True))
    assert api.post("/api/v1/ingest", json={"kind": "text", "text": BEES}).status_code == 200
    assert api.get("/api/v1/search", params={"q": "insect dance", "mode": "semantic"}).json()["results"]
    assert server.proc is not None
    libraries = {m.path.rsplit("/", 1)[-1] for m in psutil.Process(server.proc.pid).memory_maps()}
    assert any(name.startswith("libonnxruntime") for name in libraries), sorted(libraries)
    assert not any(name.startswith("libtorch") for name in libraries), sorted(libraries)
    child = _ingest_processes(server)[0]
    libraries = {m.path.rsplit("/", 1)[-1] for m in child.memory_maps()}
    assert any(name.startswith("libonnxruntime") for name in libraries), sorted(libraries)
    assert not any(name.startswith("libtorch") for name in libraries), sorted(libraries)


def test_queries_that_arrive_together_are_embedded_in_one_batch() -> None:
    local = LocalEmbedder()
    texts = ["bees", "how do honeybees find flowers far from the hive", "a", "mitochondrial membrane potential"]
    sizes: list[int] = []

    def batch(items: list[str]) -> list[list[float]]:
        sizes.append(len(items))
        return local.embed_queries(items)

    async def go() -> tuple[list[list[float]], list[float]]:
        batcher = QueryBatcher(batch)
        together = await asyncio.gather(*(batcher.embed(t) for t in texts))
        alone = await batcher.embed(texts[1])
        return list(together), alone

    together, alone = asyncio.run(go())
    # the first finds the thread idle and starts at once, alone; the three that came meanwhile go in one pass;
    # a lone query later is not held back
    assert sizes == [1, len(texts) - 1, 1]
    for text, vec in zip(texts, together, strict=True):
        single = local.embed_query(text)
        assert max(abs(a - b) for a, b in zip(vec, single, strict=True)) < 1e-5
    assert max(abs(a - b) for a, b in zip(alone, together[1], strict=True)) < 1e-5
