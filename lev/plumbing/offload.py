"""CPU-heavy pure work (parsing feeds and OPML, extracting pages, decoding large texts and captions, tokenizing and
chunking large texts) run in a small pool of child processes, so that no request or job holds the event loop: a
thread would hold the GIL for seconds on a pathological input, and every request of the process would wait behind
it.

The pool (pebble's `ProcessPool`) is the process's own, opened on first use (`configure` sets its size and
niceness) and closed by the composition root on shutdown, its children killed (work in flight is abandoned: a job
is retried by its durable record). Each call has a deadline (`DEADLINE_SEC` unless it says): past it, or when its
caller gives up (a request cancelled, a check's own timeout), the child running it is killed and replaced, and the
other calls go on in theirs; before, a child went on with an abandoned input to the end, holding one of the pool's
two slots for as long as a quadratic parse took. A child is replaced after `RECYCLE_AFTER` calls, so what huge
inputs made it allocate is given back.
Small inputs run inline on a thread: a process round trip costs more than they do, and below `INLINE_MAX_BYTES`
even a parser's quadratic corner costs little (16 KB is a sixteenth of what 64 KB cost).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from pebble import ProcessExpired, ProcessPool

T = TypeVar("T")

RECYCLE_AFTER = 100
INLINE_MAX_BYTES = 16 * 1024  # below this, the work takes milliseconds: it runs on a thread of this process
DEADLINE_SEC = 60.0  # a call's default bound in its child


class OffloadFailed(RuntimeError):
    """A child process died while it worked (killed, out of memory, past its deadline); the work did not
    finish."""


_lock = threading.Lock()
_pool: ProcessPool | None = None
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


def _get() -> ProcessPool:
    global _pool
    with _lock:
        if _pool is None or not _pool.active:
            _pool = ProcessPool(_size, max_tasks=RECYCLE_AFTER, initializer=_child_start, initargs=(_nice,),
                                context=multiprocessing.get_context("spawn"))
        return _pool


def _discard(pool: ProcessPool) -> None:
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.stop()
    threading.Thread(target=pool.join, daemon=True).start()  # joining stops its children


async def run(fn: Callable[..., T], *args: Any, size: int | None = None, deadline: float = DEADLINE_SEC) -> T:
    """`fn(*args)` in a child process (a module-level function whose arguments and result pickle), for at most
    `deadline` seconds; on a thread of this process when `size` (the input's bytes or characters) is below
    INLINE_MAX_BYTES. Raises what `fn` raised, or OffloadFailed when its child died or ran out of time (the child
    is killed then, as when the caller is cancelled)."""
    if size is not None and size < INLINE_MAX_BYTES:
        return await asyncio.to_thread(fn, *args)
    pool = _get()
    try:
        future = pool.schedule(fn, args=args, timeout=deadline)
    except RuntimeError:  # the pool was closing: a new one
        _discard(pool)
        pool = _get()
        future = pool.schedule(fn, args=args, timeout=deadline)
    try:
        return await asyncio.wrap_future(future)  # cancelled here: pebble kills the child running it
    except FutureTimeout:
        raise OffloadFailed(f"the work took longer than {deadline:g} s and was stopped") from None
    except ProcessExpired:
        raise OffloadFailed("the process doing this work stopped before it finished") from None
    except BrokenProcessPool:
        _discard(pool)
        raise OffloadFailed("the process doing this work stopped before it finished") from None


def shutdown() -> None:
    """Close the pool and kill its children at once (a stopping process abandons their work)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.stop()
        pool.join()  # its children are killed here
