"""Query work never waits for ingest work: an API process embeds ingested text on its ingest threads, at lower CPU
priority, and its searches embed their queries on their own thread, so a query is embedded while no ingest
embedding can move at all. Query embeddings that arrive together are embedded together."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from lev.embedding.embedder import LocalEmbedder
from lev.embedding.pool import IngestThreads, QueryBatcher, turn
from tests.stack import Api, LiveServer, User

BEES = "Honeybees communicate the direction of flowers with a waggle dance inside the hive."


def _nice(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


def test_queries_are_embedded_while_every_ingest_thread_is_held() -> None:
    emb = LocalEmbedder(threads=1, nice=4)
    gate = threading.Event()
    held = emb.ingest.submit(gate.wait)  # the one ingest thread cannot move until the gate opens
    try:
        with ThreadPoolExecutor(1) as caller:
            ingest = caller.submit(emb.embed, [BEES, "a second chunk of the same document"])
            for _ in range(3):
                assert len(emb.embed_query("how do insects talk")) == 384
            assert not ingest.done()  # its runs wait behind the held thread; the queries did not
            alone = emb.embed_query(BEES)
            gate.set()
            vectors = ingest.result(120)
        assert held.result() is True
        assert max(abs(a - b) for a, b in zip(vectors[0], alone, strict=True)) < 1e-5
    finally:
        gate.set()
        emb.close()


def test_jobs_embed_at_lower_cpu_priority_and_requests_at_the_servers() -> None:
    emb = LocalEmbedder(threads=2, nice=3)
    try:
        here = _nice(threading.get_native_id())

        def where() -> tuple[int, int]:
            return threading.get_native_id(), _nice(threading.get_native_id())

        with turn("a job's user", later=True):
            seen = {emb.ingest.submit(where).result() for _ in range(4)}
        assert seen and all(nice == min(19, here + 3) for _, nice in seen)
        asked = {emb.ingest.submit(where).result() for _ in range(4)}  # a request's (the default turn)
        assert asked and all(nice == here for _, nice in asked) and not {t for t, _ in asked} & {t for t, _ in seen}
        assert _nice(threading.get_native_id()) == here  # the caller's priority is untouched
    finally:
        emb.close()


def test_the_server_embeds_ingested_text_on_niced_threads(server: LiveServer, user: User) -> None:
    api = Api(server.url, user.token(write=True))
    r = api.post("/api/v1/ingest", json={"kind": "text", "text": BEES, "auto_transform": False})
    assert r.status_code == 200 and r.json()["status"] == "ready"  # the contract: ready on return
    assert server.proc is not None
    proc = psutil.Process(server.proc.pid)
    main = _nice(proc.pid)
    nices = [_nice(t.id) for t in proc.threads()]
    assert nices.count(min(19, main + 4)) >= 1, nices  # LEV_INGEST_EMBED_NICE's threads, for the jobs' batches
    assert nices.count(main) >= 2, nices  # the event loop's and the others at the server's priority
    hits = api.get("/api/v1/search", params={"q": "waggle dance direction of flowers", "mode": "semantic"}).json()
    assert hits["results"][0]["text"].startswith("Honeybees")


def test_the_api_process_embeds_with_onnx_runtime_and_without_torch(server: LiveServer, user: User) -> None:
    """tests/embedding/test_no_torch.py shows it never even tries to import torch."""
    api = Api(server.url, user.token(write=True))
    assert api.post("/api/v1/ingest", json={"kind": "text", "text": BEES}).status_code == 200
    assert api.get("/api/v1/search", params={"q": "insect dance", "mode": "semantic"}).json()["results"]
    assert server.proc is not None
    libraries = {m.path.rsplit("/", 1)[-1] for m in psutil.Process(server.proc.pid).memory_maps()}
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


def test_query_threads_embed_batches_side_by_side() -> None:
    """With two query threads, a query that arrives while another computes starts at once on the other thread: each
    batch waits at a barrier that only two batches running at the same time can pass."""
    local = LocalEmbedder()
    together = threading.Barrier(2, timeout=60)
    sizes: list[int] = []

    def batch(items: list[str]) -> list[list[float]]:
        sizes.append(len(items))
        together.wait()
        return local.embed_queries(items)

    async def go() -> list[list[float]]:
        batcher = QueryBatcher(batch, threads=2)
        return list(await asyncio.gather(batcher.embed("bees"), batcher.embed("honeybees find flowers")))

    vectors = asyncio.run(go())
    assert sizes == [1, 1]
    assert max(abs(a - b) for a, b in zip(vectors[1], local.embed_query("honeybees find flowers"), strict=True)) < 1e-5


def test_a_batcher_whose_threads_are_gone_answers_with_an_error_and_keeps_no_slot() -> None:
    async def go() -> list[str]:
        batcher = QueryBatcher(lambda items: [[0.0] for _ in items], threads=1)
        batcher._executor.shutdown()
        outcomes = []
        for _ in range(3):  # past the one slot: each still answers at once
            try:
                await asyncio.wait_for(batcher.embed("q"), 5)
                outcomes.append("answered")
            except RuntimeError:
                outcomes.append("refused")
        assert batcher._busy == 0
        return outcomes

    assert asyncio.run(go()) == ["refused"] * 3


def test_ingest_threads_embed_when_the_system_forbids_lowering_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*_args: object) -> None:
        raise PermissionError("setpriority is not allowed here")

    monkeypatch.setattr(os, "setpriority", forbidden)
    with IngestThreads(2, nice=4) as threads:
        assert list(threads.map(len, ["ab", "abc"])) == [2, 3]


def test_a_request_s_runs_go_first_and_jobs_take_turns_per_user() -> None:
    """Issue 47 item 4: the ingest threads took runs first come, first served: a one-sentence note waited behind
    every queued run of another user's million-character note (p50 4.6 s, max 10 s to ready here). Now whatever a
    request waits for runs next, and jobs' runs alternate between their users."""
    order: list[str] = []
    gate = threading.Event()

    def run(name: str) -> str:
        if name == "blocker":
            gate.wait(10)
        order.append(name)
        return name

    with IngestThreads(1, nice=0) as threads:
        with turn("job-starter", later=True):
            first = threads.submit(run, "blocker")  # holds the one job thread until the gate opens
        time.sleep(0.2)
        with turn("alice", later=True):
            alice = [threads.submit(run, f"alice-{n}") for n in range(4)]
        with turn("erin", later=True):
            erin = [threads.submit(run, f"erin-{n}") for n in range(2)]
        note = threads.submit(run, "erin's note")  # a request's: its own thread, at once
        assert note.result(5) == "erin's note" and order == ["erin's note"]
        gate.set()
        for f in [first, *alice, *erin]:
            f.result(10)
    assert order == ["erin's note", "blocker", "alice-0", "erin-0", "alice-1", "erin-1", "alice-2", "alice-3"]
