"""Where embeddings run in an API process: query embeddings on their own thread, batched under concurrency
(`QueryBatcher`, `embed_query`), and ingest batches in low-priority child processes (`IngestPool`, running
`lev.embedding.child`), so a search never queues behind an ingest."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from lev.core.settings import get_settings
from lev.embedding import query_graph
from lev.embedding.embedder import Embedder, LocalEmbedder, TimedEmbedder, get_embedder, send_batches_to

READY = b"LEV-EMBED-READY\n"  # the child's first line once its model is loaded


QUERY_BATCH_MAX = 16


class QueryBatcher:
    """Query embeddings on one dedicated thread, batched under concurrency.

    A query that finds the thread idle is embedded at once, alone (no added wait at concurrency 1); queries that
    arrive while it is busy are collected and embedded together when it is free (`embed_queries`: in runs of
    similar length). The
    thread serves only queries: ingest batches go elsewhere (`IngestPool`), so a query never queues behind them.
    """

    def __init__(self, embed_batch: Callable[[list[str]], list[list[float]]], max_batch: int = QUERY_BATCH_MAX) -> None:
        self._embed_batch = embed_batch
        self.max_batch = max_batch
        self._pending: list[tuple[str, asyncio.Future[list[float]]]] = []
        self._running = False
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="lev-query-embed")
        self.batches: list[int] = []  # sizes of the last batches (bounded), for the benchmark's report

    def submit(self, text: str) -> asyncio.Future[list[float]]:
        """The future vector of `text`. An idle thread starts on it before this returns (the caller's next
        statements already overlap with it); otherwise it joins the next batch."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[float]] = loop.create_future()
        self._pending.append((text, future))
        if not self._running:
            self._running = True
            self._next_batch(loop)
        return future

    async def embed(self, text: str) -> list[float]:
        return await self.submit(text)

    def _next_batch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the pending queries (up to `max_batch`, cancelled ones skipped) to the thread; when it is done,
        the next batch follows from its callback. Runs on the event loop."""
        while self._pending:
            batch = [(t, f) for t, f in self._pending[:self.max_batch] if not f.done()]
            del self._pending[:self.max_batch]
            if batch:
                self.batches = [*self.batches[-999:], len(batch)]
                work = loop.run_in_executor(self._executor, self._embed_batch, [t for t, _ in batch])
                work.add_done_callback(lambda done, batch=batch: self._finish(loop, batch, done))  # type: ignore[misc]
                return
        self._running = False

    def _finish(self, loop: asyncio.AbstractEventLoop, batch: list[tuple[str, asyncio.Future[list[float]]]],
                done: asyncio.Future[list[list[float]]]) -> None:
        exc = None if done.cancelled() else done.exception()
        for i, (_, f) in enumerate(batch):
            if not f.done():
                if done.cancelled():
                    f.cancel()
                elif exc is not None:
                    f.set_exception(exc)
                else:
                    f.set_result(done.result()[i])
        self._next_batch(loop)


_batcher: QueryBatcher | None = None
_batcher_loop: asyncio.AbstractEventLoop | None = None


def query_batcher() -> QueryBatcher:
    """The process's query batcher (one per event loop)."""
    global _batcher, _batcher_loop
    loop = asyncio.get_running_loop()
    if _batcher is None or _batcher_loop is not loop:
        _batcher = QueryBatcher(get_embedder().embed_queries, max(1, get_settings().query_batch_max))
        _batcher_loop = loop
    return _batcher


def embed_query(query: str) -> asyncio.Future[list[float]]:
    """The future vector of a search query, from the query thread (batched with concurrent queries); its
    embedding starts before this returns when the thread is idle."""
    return query_batcher().submit(query)


class IngestProcess:
    """One `lev.embedding.child` child: embeds ingest batches at lower CPU priority, one batch at a time,
    restarted when it dies."""

    def __init__(self, nice: int, threads: int) -> None:
        self.nice = nice
        self.threads = threads
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, graph: Path | None = None) -> None:
        # A background process on a busy machine: its OpenMP threads sleep instead of spinning while they wait.
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        args = [sys.executable, "-m", "lev.embedding.child", str(self.nice), str(self.threads)]
        proc = subprocess.Popen(args + ([str(graph)] if graph else []), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=env)
        assert proc.stdout is not None
        if proc.stdout.readline() != READY:
            proc.kill()
            proc.wait()
            raise RuntimeError("the ingest embedding process did not start (see the log above)")
        self._proc = proc

    def _ask(self, texts: list[str]) -> list[list[float]]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        body = json.dumps(texts).encode()
        proc.stdin.write(len(body).to_bytes(4, "big") + body)
        proc.stdin.flush()
        header = proc.stdout.read(4)
        if len(header) < 4:
            raise EOFError("the ingest embedding process exited")
        reply = proc.stdout.read(int.from_bytes(header, "big"))
        if reply[:1] == b"E":
            raise RuntimeError(f"ingest embedding failed: {reply[1:].decode(errors='replace')}")
        rows: list[list[float]] = np.frombuffer(reply[1:], dtype=np.float32).reshape(len(texts), -1).tolist()
        return rows

    def embed(self, texts: list[str]) -> list[list[float]]:
        for attempt in (1, 2):  # a child killed under us is replaced once
            if self._proc is None or self._proc.poll() is not None:
                self.start()
            try:
                return self._ask(texts)
            except (OSError, EOFError, ValueError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self, wait_sec: float = 10.0) -> None:
        """EOF to the child, which exits; killed if it has not after `wait_sec` (it holds nothing worth waiting for)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()  # EOF: the child exits
            except OSError:
                pass
        try:
            proc.wait(wait_sec)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class IngestPool:
    """The low-priority embedding processes of an API process; callers (worker threads) wait for a free one, so
    at most `len(processes)` ingest batches are embedded at once."""

    def __init__(self, processes: int, nice: int, threads: int) -> None:
        self.processes = [IngestProcess(nice, threads) for _ in range(processes)]
        self._free: queue.Queue[IngestProcess] = queue.Queue()
        for p in self.processes:
            self._free.put(p)

    def start(self) -> None:
        """Start every process (blocking); callers that come meanwhile wait for a started one. The first also
        writes the query graph this process then loads (so it never loads the eager model itself)."""
        for i in range(len(self.processes)):
            p = self._free.get()
            try:
                if i == 0:
                    fd, name = tempfile.mkstemp(prefix="lev-query-graph-", suffix=".onnx")
                    os.close(fd)
                    graph = Path(name)
                    try:
                        p.start(graph)
                        query_graph.use_query_graph(graph)
                        query_graph.load()  # now, while the file exists
                    finally:
                        graph.unlink(missing_ok=True)
                else:
                    p.start()
            finally:
                self._free.put(p)

    def embed(self, texts: list[str]) -> list[list[float]]:
        p = self._free.get()
        try:
            return p.embed(texts)
        finally:
            self._free.put(p)

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.pid is not None]

    def close(self, wait_sec: float = 10.0) -> None:
        for p in self.processes:
            p.close(wait_sec)


_ingest_pool: IngestPool | None = None


def use_ingest_pool(processes: int, nice: int, threads: int) -> IngestPool | None:
    """Send this process's ingest (batch) embedding to `processes` children at CPU priority +`nice` from now on
    (local model only; 0 processes: embed in this process). They start with `IngestPool.start`; batches that
    come before wait for them."""
    global _ingest_pool
    if processes <= 0 or not isinstance(_configured_embedder_cached(), LocalEmbedder):
        return None
    _ingest_pool = IngestPool(processes, nice, threads)
    send_batches_to(_ingest_pool.embed)
    return _ingest_pool


def stop_ingest_pool(wait_sec: float = 10.0) -> None:
    global _ingest_pool
    pool, _ingest_pool = _ingest_pool, None
    send_batches_to(None)
    if pool is not None:
        pool.close(wait_sec)


def _configured_embedder_cached() -> Embedder:
    emb = get_embedder()
    return emb.inner if isinstance(emb, TimedEmbedder) else emb
