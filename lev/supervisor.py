"""What keeps `lev serve`'s embedded stack running and its stop bounded.

`Supervisor`: a thread that checks every second whether the embedded Redis and PostgreSQL of the data directory run
and starts a dead one again at once (kill -9, the OOM killer), from its own files (Redis replays its append-only
file, PostgreSQL recovers from its WAL), on the same socket, so every client of the process reconnects by itself.
A start that fails is tried again after 1, 2, 4 ... 30 s; a server that keeps dying right after its restart is
started with the same growing delay. Every death and restart is logged.

`ShutdownWatchdog`: from the first SIGTERM/SIGINT, the process has LEV_SHUTDOWN_GRACE_SEC in all. Requests and jobs
get that time less a short reserve for closing (`lev.runtime.shutdown_budget`); should closing hang anyway (a part
that does not answer), the watchdog stops the servers this process started and ends the process when the time is up.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lev import embedded
from lev.ops import logs

log = logs.get_logger("lev.supervisor")

CHECK_EVERY_SEC = 1.0
BACKOFF_MAX_SEC = 30.0
RECENT_SEC = 60.0  # restarts within this window count towards a crash loop


@dataclass
class _Part:
    name: str
    running: Callable[[], bool]
    start: Callable[[], object]
    down_since: float | None = None
    failures: int = 0
    next_try: float = 0.0
    restarts: list[float] = field(default_factory=list)


class Supervisor:
    """Restarts the embedded servers of `data_dir` (those this `lev serve` uses) when they die."""

    def __init__(self, data_dir: Path, *, redis: bool, postgres: bool) -> None:
        self.parts: list[_Part] = []
        if redis:
            self.parts.append(_Part("redis", lambda: embedded.redis_running(data_dir),
                                    lambda: embedded.ensure_redis(data_dir)))
        if postgres:
            self.parts.append(_Part("postgres", lambda: embedded.postgres_running(data_dir),
                                    lambda: embedded.restart_postgres(data_dir)))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.parts and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lev-supervisor", daemon=True)
            self._thread.start()

    def stop(self, wait_sec: float = 0.0) -> None:
        """No more restarts (a restart under way finishes; `wait_sec` waits for it)."""
        self._stop.set()
        if self._thread is not None and wait_sec > 0:
            self._thread.join(wait_sec)

    def _run(self) -> None:
        while not self._stop.wait(CHECK_EVERY_SEC):
            for part in self.parts:
                if self._stop.is_set():
                    return
                try:
                    self.tend(part)
                except Exception:  # never let the supervisor die with what it supervises
                    log.exception("supervising the embedded server failed", server=part.name)

    def tend(self, part: _Part) -> None:
        """One check of one server: note a death, start it once its delay is over, note the restart."""
        now = time.monotonic()
        if part.running():
            part.down_since = None
            return
        if part.down_since is None:  # a new death
            part.down_since, part.failures = now, 0
            part.restarts = [t for t in part.restarts if now - t < RECENT_SEC]
            # it died again soon after a restart: wait longer each time (a crash loop must not spin)
            delay = min(BACKOFF_MAX_SEC, 2.0 ** (len(part.restarts) - 1)) if part.restarts else 0.0
            part.next_try = now + delay
            log.warning("embedded server is not running; starting it again", server=part.name, restart_in_sec=delay)
        if now < part.next_try:
            return
        try:
            part.start()
        except Exception as exc:
            part.failures += 1
            delay = min(BACKOFF_MAX_SEC, 2.0 ** (part.failures - 1))
            part.next_try = time.monotonic() + delay
            log.error("could not start the embedded server; trying again", server=part.name,
                      error=f"{type(exc).__name__}: {str(exc)[:200]}", retry_in_sec=delay, attempts=part.failures)
            return
        done = time.monotonic()
        log.warning("embedded server restarted", server=part.name, down_sec=round(done - part.down_since, 2),
                    attempts=part.failures + 1)
        part.restarts.append(done)
        part.down_since = None


OVERRUN_RESERVE_SHARE, OVERRUN_RESERVE_MAX_SEC = 0.05, 0.5


class ShutdownWatchdog:
    """Ends the process at most `after_sec` after it was asked to stop, whatever is still running then: it starts
    `on_overrun` (stopping what must not be left behind) a reserve before the deadline and exits at the deadline
    even if that has not finished (in-flight embedding batches are abandoned; their durable jobs run again on the
    next start)."""

    def __init__(self, after_sec: float, on_overrun: Callable[[], None]) -> None:
        self.grace_sec = after_sec
        self.reserve_sec = min(OVERRUN_RESERVE_MAX_SEC, after_sec * OVERRUN_RESERVE_SHARE)
        self.on_overrun = on_overrun
        self._thread: threading.Thread | None = None

    def arm(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lev-shutdown-watchdog", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        time.sleep(max(0.0, self.grace_sec - self.reserve_sec))
        log.error("shutdown is overrunning LEV_SHUTDOWN_GRACE_SEC; exiting now", after_sec=round(self.grace_sec, 2))
        closing = threading.Thread(target=self.on_overrun, name="lev-shutdown-overrun", daemon=True)
        closing.start()
        closing.join(self.reserve_sec)
        os._exit(1)
