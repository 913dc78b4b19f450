"""Where embeddings run in an API process: query embeddings on their own thread, batched under concurrency
(`QueryBatcher`), and ingest batches on threads of lower CPU priority (`IngestThreads`), so a search never queues
behind an ingest. Both are owned by whoever builds them: the runtime's `QueryBatcher`, the `LocalEmbedder`'s
ingest threads."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

QUERY_BATCH_MAX = 16


class QueryBatcher:
    """Query embeddings on `threads` dedicated threads, batched under concurrency.

    A query that finds a thread idle is embedded at once, alone (no added wait at concurrency 1); queries that
    arrive while every thread is busy are collected and embedded together by the first that is free
    (`embed_queries`: in runs of similar length). The threads serve only queries: ingest batches go elsewhere
    (`IngestThreads`), so a query never queues behind them. With the local model each batch computes on its own
    thread, so `threads` is how many cores queries can use at once.
    """

    def __init__(self, embed_batch: Callable[[list[str]], list[list[float]]], max_batch: int = QUERY_BATCH_MAX,
                 threads: int = 1) -> None:
        self._embed_batch = embed_batch
        self.max_batch = max_batch
        self.threads = max(1, threads)
        self._pending: list[tuple[str, asyncio.Future[list[float]]]] = []
        self._busy = 0
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="lev-query-embed")
        self.batches: list[int] = []  # sizes of the last batches (bounded), for the benchmark's report

    def submit(self, text: str) -> asyncio.Future[list[float]]:
        """The future vector of `text`. An idle thread starts on it before this returns (the caller's next
        statements already overlap with it); otherwise it joins the next batch."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[float]] = loop.create_future()
        self._pending.append((text, future))
        self._dispatch(loop)
        return future

    async def embed(self, text: str) -> list[float]:
        return await self.submit(text)

    def _dispatch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the pending queries (up to `max_batch` a batch, cancelled ones skipped) to the idle threads; when
        one is done, the next batch follows from its callback. Runs on the event loop."""
        while self._pending and self._busy < self.threads:
            batch = [(t, f) for t, f in self._pending[:self.max_batch] if not f.done()]
            del self._pending[:self.max_batch]
            if batch:
                try:
                    work = loop.run_in_executor(self._executor, self._embed_batch, [t for t, _ in batch])
                except RuntimeError as exc:  # the threads were shut down: answer this batch, hold no slot
                    for _, f in batch:
                        if not f.done():
                            f.set_exception(exc)
                    continue
                self._busy += 1
                self.batches = [*self.batches[-999:], len(batch)]
                work.add_done_callback(lambda done, batch=batch: self._finish(loop, batch, done))  # type: ignore[misc]

    def _finish(self, loop: asyncio.AbstractEventLoop, batch: list[tuple[str, asyncio.Future[list[float]]]],
                done: asyncio.Future[list[list[float]]]) -> None:
        self._busy -= 1
        exc = None if done.cancelled() else done.exception()
        for i, (_, f) in enumerate(batch):
            if not f.done():
                if done.cancelled():
                    f.cancel()
                elif exc is not None:
                    f.set_exception(exc)
                else:
                    f.set_result(done.result()[i])
        self._dispatch(loop)


def lower_thread_priority(nice: int) -> None:
    """Raise the calling thread's CPU niceness by `nice`. Linux keeps niceness per thread (and a thread started
    later takes its creator's); elsewhere there is no per-thread niceness, so nothing changes."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError:  # a sandbox that forbids it: embed at the server's priority rather than not at all
        pass


class IngestThreads(ThreadPoolExecutor):
    """The threads that embed ingest batches (chunks, the local transformer's sentences), each at CPU niceness
    +`nice`: a search's query embedding, on its own thread at the server's priority, takes the CPU first, and a
    query never waits in their queue."""

    def __init__(self, threads: int, nice: int) -> None:
        super().__init__(max(1, threads), thread_name_prefix="lev-ingest-embed", initializer=lower_thread_priority,
                         initargs=(nice,))
        self.threads = max(1, threads)
        self.nice = nice
