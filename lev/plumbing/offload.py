"""CPU-heavy pure work (parsing feeds and OPML, extracting pages, tokenizing and chunking large texts) run in a
small pool of child processes, so that no request or job holds the event loop: a thread would hold the GIL for
seconds on a pathological input, and every request of the process would wait behind it.

The pool is the process's own, opened on first use (`configure` sets its size and niceness) and closed by the
composition root on shutdown, its children killed (work in flight is abandoned: a job is retried by its durable
record). The pool is replaced after `RECYCLE_AFTER` calls (the old one finishes what it holds, then its children
exit), so what huge inputs made them allocate is given back. Not `max_tasks_per_child`: on Python 3.11 a pool with
it hangs once two calls overlap a child's replacement.
Small inputs run inline: a process round trip costs more than they do.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")

RECYCLE_AFTER = 100
INLINE_MAX_BYTES = 64 * 1024  # below this, the work takes milliseconds: it runs on a thread of this process


class OffloadFailed(RuntimeError):
    """A child process died while it worked (killed, out of memory); the work did not finish."""


_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_calls = 0
_size = max(1, min(2, os.cpu_count() or 1))
_nice = 0


def configure(processes: int, nice: int) -> None:
    """The pool's size and the niceness its children take (the composition root calls it before first use)."""
    global _size, _nice
    _size, _nice = max(1, processes), max(0, nice)


def _child_start(nice: int) -> None:
    if nice:
        try:
            os.nice(nice)
        except OSError:  # lowering priority may be forbidden (a container's seccomp rules): run as we are
            pass


def _get() -> ProcessPoolExecutor:
    global _pool, _calls
    with _lock:
        if _pool is not None and _calls >= RECYCLE_AFTER:
            _pool.shutdown(wait=False)
            _pool = None
        if _pool is None:
            _pool = ProcessPoolExecutor(_size, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_child_start, initargs=(_nice,))
            _calls = 0
        _calls += 1
        return _pool


def _discard(pool: ProcessPoolExecutor) -> None:
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False, cancel_futures=True)


async def run(fn: Callable[..., T], *args: Any, size: int | None = None) -> T:
    """`fn(*args)` in a child process (a module-level function whose arguments and result pickle); on a thread of
    this process when `size` (the input's bytes or characters) is below INLINE_MAX_BYTES. Raises what `fn` raised,
    or OffloadFailed when its child died."""
    if size is not None and size < INLINE_MAX_BYTES:
        return await asyncio.to_thread(fn, *args)
    pool = _get()
    try:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
    except BrokenProcessPool:
        _discard(pool)
        raise OffloadFailed("the process doing this work stopped before it finished") from None


def shutdown() -> None:
    """Close the pool and kill its children at once (a stopping process abandons their work)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is None:
        return
    children = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for child in children:
        if child.is_alive():
            child.kill()
