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

Files people upload are read by a second pool of its own (`run_bounded`): each of its children may take only so
much memory (RLIMIT_AS, a little above what it holds once its modules are in) and each call only so long (an alarm
in the child, and the parent kills the pool's children when a call outlives its bound), so a hostile file fails in
words and the next file finds a fresh child, forked from a fork server that imported what the readers need once.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import os
import resource
import signal
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from pebble import ProcessExpired, ProcessPool

T = TypeVar("T")
# A fork server's child runs the main module again under `__mp_main__` (multiprocessing's spawn preparation); with the
# main module preloaded (`lev.cli` under `python -m`), runpy warns that it is already imported. It is, on purpose.
warnings.filterwarnings("ignore", message=r".*found in sys\.modules after import of package", category=RuntimeWarning)

RECYCLE_AFTER = 100
INLINE_MAX_BYTES = 16 * 1024  # below this, the work takes milliseconds: it runs on a thread of this process
DEADLINE_SEC = 60.0  # a call's default bound in its child


class OffloadFailed(RuntimeError):
    """A child process died while it worked (killed, out of memory, past its deadline); the work did not
    finish."""


class OffloadTimeout(OffloadFailed):
    """A bounded call outlived its time; its child was stopped."""


class OffloadMemory(OffloadFailed):
    """A bounded call needed more memory than its child may take."""


_lock = threading.Lock()
_pool: ProcessPool | None = None
_size = max(1, min(2, os.cpu_count() or 1))
_nice = 0
_memory = 1 << 30  # bytes of address space a bounded child may add to what it holds when it starts
_bounded: ProcessPoolExecutor | None = None
_bounded_calls = 0
# the modules each bounded pool's children have imported (its children started)
_warmed: weakref.WeakKeyDictionary[ProcessPoolExecutor, set[str]] = weakref.WeakKeyDictionary()
KILL_GRACE_SEC = 15.0  # past a call's own alarm, the parent's wait before it kills the children (a new child's
# start counts here too)


def configure(processes: int, nice: int, memory_bytes: int | None = None) -> None:
    """The pools' size, the niceness their children take and the memory a bounded child may add (the composition
    root calls it before first use)."""
    global _size, _nice, _memory
    _size, _nice = max(1, processes), max(0, nice)
    if memory_bytes is not None:
        _memory = max(64 << 20, memory_bytes)


def _child_start(nice: int) -> None:
    if nice:
        try:
            os.nice(nice)
        except OSError:  # lowering priority may be forbidden (a container's seccomp rules): run as we are
            pass


def _address_space() -> int:
    """The bytes of address space this process holds now (Linux: /proc/self/statm's first field)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


_child_memory = 0  # in a bounded child: the address space it may add (its limit is set once its modules are in)


def _bounded_start(nice: int, memory: int) -> None:
    global _child_memory
    _child_start(nice)
    _child_memory = memory


def _limit_memory() -> None:
    """RLIMIT_AS of this bounded child: what it holds now (its interpreter and modules) plus its allowance; once."""
    global _child_memory
    held = _address_space()
    if _child_memory and held:
        resource.setrlimit(resource.RLIMIT_AS, (held + _child_memory, held + _child_memory))
    _child_memory = 0


def _preload(module: str) -> None:
    importlib.import_module(module)
    _limit_memory()
    time.sleep(0.2)  # holds this child while the pool hands the other children theirs


class _Overtime(BaseException):  # not an Exception: a reader's `except Exception` must not take it for its own
    pass


def _overtime(_signum: int, _frame: object) -> None:
    raise _Overtime()


def _timed(fn: Callable[..., T], seconds: float, args: tuple[Any, ...]) -> T:
    """`fn(*args)` in a bounded child, stopped by an alarm after `seconds` (Python code between two C calls)."""
    _limit_memory()
    signal.signal(signal.SIGALRM, _overtime)
    signal.setitimer(signal.ITIMER_REAL, max(0.01, seconds))
    try:
        return fn(*args)
    except _Overtime:
        raise TimeoutError(f"stopped after {seconds:g} s") from None
    except MemoryError:
        raise
    except Exception:
        if _hit_limit():  # a C library that ran out says so in its own words (lxml: "unknown error")
            raise MemoryError("the memory limit was reached") from None
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _hit_limit() -> bool:
    """Whether this process's address space reached its RLIMIT_AS (its peak within 32 MiB of it)."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return False
    try:
        with open("/proc/self/status") as fh:
            peak = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmPeak:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return False
    return peak > limit - (32 << 20)


def _get_bounded() -> ProcessPoolExecutor:
    global _bounded, _bounded_calls
    with _lock:
        if _bounded is not None and _bounded_calls >= RECYCLE_AFTER:
            _bounded.shutdown(wait=False)
            _bounded = None
        if _bounded is None:
            _bounded = ProcessPoolExecutor(_size, mp_context=_bounded_context(), initializer=_bounded_start,
                                           initargs=(_nice, _memory))
            _bounded_calls = 0
        _bounded_calls += 1
        return _bounded


_preloads: list[str] = []


def _bounded_context() -> multiprocessing.context.BaseContext:
    """A fork server where there is one: it imports the modules the calls need once (and the process's main
    module, which every child would import again), and each child is forked from it in milliseconds; a child killed
    for its overrun costs nothing to replace. Spawn elsewhere."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    main = getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None)
    ctx.set_forkserver_preload([*_preloads, *([main] if main and main != "__main__" else [])])
    return ctx


def _kill_bounded(pool: ProcessPoolExecutor) -> None:
    """Stop a bounded pool's children now (the calls they run for others fail: OffloadFailed, tried again)."""
    global _bounded
    with _lock:
        if _bounded is pool:
            _bounded = None
    _kill(pool)


def _kill(pool: ProcessPoolExecutor) -> None:
    children = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for child in children:
        if child.is_alive():
            child.kill()


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _turn() -> asyncio.Semaphore:
    """At most one bounded call per child in flight from this event loop: a call's clock runs only once a child
    is free for it (one waiting behind others is never stopped for their time)."""
    loop = asyncio.get_running_loop()
    turn = _turns.get(loop)
    if turn is None:
        turn = _turns[loop] = asyncio.Semaphore(_size)
    return turn


async def run_bounded(fn: Callable[..., T], *args: Any, seconds: float) -> T:
    """`fn(*args)` in a bounded child process: at most `seconds` (OffloadTimeout) and the memory its child may take
    (OffloadMemory); raises what `fn` raised, or OffloadFailed when its child died."""
    async with _turn():
        return await _bounded_call(fn, args, seconds)


async def prepare(module: str) -> None:
    """Start the bounded pool's children and import `module` in each (what its calls run), never on a call's clock;
    the composition root calls it at startup. A child that cannot start is left to the first call to find."""
    if module not in _preloads:
        _preloads.append(module)
    try:
        await _prepared(_get_bounded(), module)
    except (OffloadFailed, RuntimeError):  # the pool closed meanwhile (the process is stopping)
        pass


async def _prepared(pool: ProcessPoolExecutor, module: str) -> None:
    ready = _warmed.setdefault(pool, set())
    if module in ready:
        return
    loop = asyncio.get_running_loop()
    try:
        await asyncio.gather(*(loop.run_in_executor(pool, _preload, module) for _ in range(_size)))
    except BrokenProcessPool:
        _kill_bounded(pool)
        raise OffloadFailed("the process doing this work could not start") from None
    ready.add(module)


async def _bounded_call(fn: Callable[..., T], args: tuple[Any, ...], seconds: float) -> T:
    pool = _get_bounded()
    await _prepared(pool, fn.__module__)  # the children start and import fn's module first
    future = asyncio.get_running_loop().run_in_executor(pool, _timed, fn, seconds, args)
    try:
        return await asyncio.wait_for(future, seconds + KILL_GRACE_SEC)
    except TimeoutError as exc:
        if not future.done():  # the child did not stop itself (a long C call): stop it
            _kill_bounded(pool)
        raise OffloadTimeout(f"the work took longer than {seconds:g} s and was stopped") from exc
    except MemoryError:
        _kill_bounded(pool)  # a child that ran out may hold what it could not free
        raise OffloadMemory("the work needed more memory than it may take") from None
    except BrokenProcessPool:
        _kill_bounded(pool)
        raise OffloadFailed("the process doing this work stopped before it finished") from None


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


def shutdown(join_sec: float = 1.0) -> None:
    """Close the pools and kill their children at once (a stopping process abandons their work), waiting at most
    `join_sec` for them to go."""
    global _pool, _bounded
    with _lock:
        pool, bounded, _pool, _bounded = _pool, _bounded, None, None
    if bounded is not None:
        _kill(bounded)
    if pool is not None:
        pool.stop()
        pool.join(timeout=join_sec)  # its children are killed here; a stopping process does not wait on a slow one
