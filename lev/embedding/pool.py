"""Where embeddings run in an API process: query embeddings on their own thread, batched under concurrency
(`QueryBatcher`), and ingest batches in low-priority child processes (`IngestPool`, running `lev.embedding.child`),
so a search never queues behind an ingest. Both are owned by whoever builds them: the runtime's `QueryBatcher`,
the `LocalEmbedder`'s pool."""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

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

    def start(self) -> None:
        args = [sys.executable, "-m", "lev.embedding.child", str(self.nice), str(self.threads)]
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
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

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()  # EOF: the child exits
            except OSError:
                pass
        try:
            proc.wait(10)
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
        """Start every process (blocking); callers that come meanwhile wait for a started one."""
        for _ in range(len(self.processes)):
            p = self._free.get()
            try:
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

    def close(self) -> None:
        for p in self.processes:
            p.close()
