"""What a starting `lev serve` says while it waits: each step as it begins, and at the end how long each took.
Silent unless `enable()` was called (tests that open the runtime in-process print nothing)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_started = time.monotonic()
_enabled = False
_took: dict[str, float] = {}
_lock = threading.Lock()


def enable(since: float | None = None) -> None:
    """Say the steps from now on; `since` (a time.monotonic()) is when the process began, if earlier."""
    global _enabled, _started
    _enabled = True
    if since is not None:
        _started = min(_started, since)


def say(words: str) -> None:
    if _enabled:
        print(f"Lev: {words}", file=sys.stderr, flush=True)


@contextmanager
def step(name: str, words: str) -> Iterator[None]:
    """Say `words…` now; record how long the block took under `name`."""
    say(f"{words}…")
    began = time.monotonic()
    try:
        yield
    finally:
        with _lock:
            _took[name] = _took.get(name, 0.0) + time.monotonic() - began


def elapsed() -> float:
    return time.monotonic() - _started


def summary() -> str:
    """`started in 6.2 s (code 2.9 s, PostgreSQL and Redis 1.0 s, ...)`."""
    with _lock:
        parts = ", ".join(f"{name} {sec:.1f} s" for name, sec in _took.items())
    return f"started in {elapsed():.1f} s" + (f" ({parts})" if parts else "")
