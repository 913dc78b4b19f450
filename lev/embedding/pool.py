"""Where embeddings run in an API process: query embeddings on their own thread, batched under concurrency
(`QueryBatcher`), and ingest batches on threads of lower CPU priority (`IngestThreads`), so a search never queues
behind an ingest. Both are owned by whoever builds them: the runtime's `QueryBatcher`, the `LocalEmbedder`'s
ingest threads.

The ingest threads take their work in turns (`turn`): what a request waits for before what a job does, and within
each, one run of each owner's in turn. A user's one-sentence note is embedded next, never behind the queued runs
of another user's million-character note."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any

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


_turn: ContextVar[tuple[bool, str]] = ContextVar("lev_embedding_turn", default=(False, ""))


@contextlib.contextmanager
def turn(owner: str, *, later: bool = False) -> Iterator[None]:
    """Embeddings asked for in this context (threads started from it included) are `owner`'s: a request's (taken
    first), or with `later` a job's (taken when no request waits). Each owner's runs take turns with the others'."""
    token = _turn.set((later, owner))
    try:
        yield
    finally:
        _turn.reset(token)


_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class IngestThreads(Executor):
    """The threads that embed ingest batches (chunks, the local transformer's sentences): `threads` for jobs' work
    at CPU niceness +`nice` (a search's query embedding, on its own thread at the server's priority, takes the CPU
    first, and a query never waits in their queue), and as many at the server's priority for the work a request
    waits for (a niced thread starves on a busy machine). A free thread takes the next run of the next owner in turn
    (`turn`)."""

    def __init__(self, threads: int, nice: int) -> None:
        self.threads = max(1, threads)
        self.nice = nice
        self._ready = threading.Condition()
        self._lanes: tuple[OrderedDict[str, deque[_Work]], OrderedDict[str, deque[_Work]]] = (
            OrderedDict(), OrderedDict())  # requests' work, then jobs': each owner's runs, owners in turn
        self._closed = False
        self._workers = [threading.Thread(target=self._serve, args=(lane,), name=f"lev-ingest-embed-{lane}-{n}",
                                          daemon=True) for lane in (0, 1) for n in range(self.threads)]
        for worker in self._workers:
            worker.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        later, owner = _turn.get()
        future: Future[Any] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._lanes[1 if later else 0].setdefault(owner, deque()).append((future, fn, args, kwargs))
            self._ready.notify_all()  # a thread of the work's lane takes it
        return future

    def _next(self, lane: int) -> _Work | None:
        queued = self._lanes[lane]
        if not queued:
            return None
        owner, runs = queued.popitem(last=False)
        work = runs.popleft()
        if runs:
            queued[owner] = runs  # the owner goes to the end of the turn
        return work

    def _serve(self, lane: int) -> None:
        if lane:
            lower_thread_priority(self.nice)
        while True:
            with self._ready:
                work = self._next(lane)
                while work is None and not self._closed:
                    self._ready.wait()
                    work = self._next(lane)
            if work is None:
                return
            future, fn, args, kwargs = work
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._ready:
            self._closed = True
            if cancel_futures:
                for lane in self._lanes:
                    for runs in lane.values():
                        for future, *_ in runs:
                            future.cancel()
                    lane.clear()
            self._ready.notify_all()
        if wait:
            for worker in self._workers:
                worker.join()
