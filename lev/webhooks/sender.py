"""The outbox's sender: one asyncio task per worker process that posts due deliveries as soon as they are committed.

It is woken by a Redis message published after each commit that records deliveries (`events.nudge_after_commit`),
by a retry falling due, and every `SWEEP_SEC` in any case (the safety net for a lost message: Redis away, a process
killed between its commit and its message). Each wake takes the due deliveries in one statement with a lease
(`store.webhooks.claim_due`), so senders of several workers share them and none posts an attempt another holds.

Per endpoint at most `HEALTHY_CAP` attempts run at once (`FAILING_CAP` while its last attempt failed), and at most
`MAX_IN_FLIGHT` in the process: a hanging endpoint holds its own few slots for up to 10 s each and nothing of anyone
else's, and what is not taken waits in PostgreSQL, not in memory. A claim takes up to twice an endpoint's cap: the
attempts it may run and as many queued behind them, so a finished attempt's successor starts at once, and the next
claim (woken when an endpoint's queue has run dry) runs while the endpoint's slots are still busy. Queued
deliveries of an endpoint that starts failing, or that waited too long for a slot, are handed back. Outcomes are
written every `WRITE_EVERY_SEC`, one transaction for whatever finished meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import time
import uuid
from collections import deque
from datetime import timedelta
from typing import Any

from lev.core import clock
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.store import webhooks as webhook_store
from lev.webhooks import deliver, events

HEALTHY_CAP = 16  # attempts at once per endpoint answering well
FAILING_CAP = 1  # per endpoint whose last attempt failed (hanging, refusing, erroring)
WRITE_EVERY_SEC = 0.05  # outcomes gathered this long are written in one transaction (the receiver has them)
AHEAD = 2  # an endpoint's claimed deliveries, running and queued: this many times its cap
MAX_IN_FLIGHT = 256  # attempts at once per process (claimed: running or queued)
QUEUED_MAX_SEC = 10.0  # a queued delivery that waited this long is handed back (its lease is deliver.LEASE_SEC)
SWEEP_SEC = 5.0
LISTEN_RETRY_SEC = 1.0
STOP_WAIT_SEC = 2.0
WRITE_TRIES = 5

log = logs.get_logger("lev.webhooks")


class Sender:
    """Delivers the outbox from this process until `stop`."""

    def __init__(self, deps: Deps, *, sweep_sec: float = SWEEP_SEC) -> None:
        self.deps = deps
        self.sweep_sec = sweep_sec
        self.wake = asyncio.Event()
        self.held: dict[uuid.UUID, int] = {}  # endpoint -> deliveries claimed here (running or queued)
        self.active: dict[uuid.UUID, int] = {}  # endpoint -> attempts running
        self.queued: dict[uuid.UUID, deque[tuple[float, dict[str, Any]]]] = {}  # endpoint -> (claimed at, delivery)
        self.caps: dict[uuid.UUID, int] = {}  # endpoint -> its cap as last claimed (FAILING_CAP once one fails)
        self.handed_back: list[uuid.UUID] = []  # queued deliveries given back, released with the next write
        self.asked: set[uuid.UUID] = set()  # endpoints with room that woke the claim since it last ran
        self.running: dict[uuid.UUID, asyncio.Task[None]] = {}  # delivery -> its attempt
        self.retries: list[float] = []  # monotonic times when retries recorded here fall due
        self.outcomes: list[dict[str, Any]] = []
        self.written = asyncio.Event()
        self.have_outcomes = asyncio.Event()
        self.stopping = False
        self.sent = 0
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._listen()), loop.create_task(self._deliver()),
                       loop.create_task(self._write())]

    def nudge(self) -> None:
        self.wake.set()

    async def stop(self, grace_sec: float = STOP_WAIT_SEC) -> None:
        """Take nothing more; let running attempts finish for `grace_sec`; hand back the rest unattempted."""
        self.stopping = True
        self.wake.set()
        for task in self._tasks[:2]:
            task.cancel()
        running = list(self.running.values())
        if running:
            await asyncio.wait(running, timeout=max(0.0, grace_sec))
        left = [d for d, t in self.running.items() if not t.done()]
        for d in left:
            self.running[d].cancel()
        left += [delivery["id"] for queue in self.queued.values() for _, delivery in queue]
        self.queued.clear()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(STOP_WAIT_SEC):
                if left:
                    async with self.deps.db.transaction() as s:
                        await webhook_store.release(s, left)
                await self._flush()
        if self._tasks:
            self._tasks[2].cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # ------------------------------------------------------------------------------------------------ waking

    async def _listen(self) -> None:
        """Wake on every message of the nudge channel; (re)subscribing wakes too (messages sent meanwhile were
        missed)."""
        while not self.stopping:
            pubsub = None
            try:
                pubsub = self.deps.redis.pubsub(ignore_subscribe_messages=True)
                await pubsub.subscribe(events.NUDGE_CHANNEL)
                self.wake.set()
                async for _message in pubsub.listen():
                    self.wake.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: the sweep goes on; listen again when it answers
                log.debug("webhook nudges unavailable", error=type(exc).__name__)
                await asyncio.sleep(LISTEN_RETRY_SEC)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()

    def _next_wait(self) -> float:
        now = time.monotonic()
        while self.retries and self.retries[0] <= now:
            heapq.heappop(self.retries)
        wait = self.sweep_sec
        if self.retries:
            wait = min(wait, self.retries[0] - now + 0.05)
        return max(0.0, wait)

    async def _deliver(self) -> None:
        while not self.stopping:
            try:
                async with asyncio.timeout(self._next_wait()):
                    await self.wake.wait()
            except TimeoutError:
                pass
            self.wake.clear()
            if self.stopping:
                return
            try:
                await self._claim()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database away: the deliveries wait for the next wake
                log.warning("could not take webhook deliveries", error=f"{type(exc).__name__}: {exc}"[:300])
                await asyncio.sleep(LISTEN_RETRY_SEC)

    # ------------------------------------------------------------------------------------------------ attempts

    async def _claim(self) -> None:
        room = MAX_IN_FLIGHT - sum(self.held.values())
        if room <= 0:
            return
        self.asked.clear()
        full = [w for w, n in self.held.items() if not self._refillable(w, n)]
        async with self.deps.db.statement() as s:
            taken = await webhook_store.claim_due(
                s, limit=room, held=self.held, full=full, healthy_cap=AHEAD * HEALTHY_CAP,
                failing_cap=AHEAD * FAILING_CAP, lease_sec=deliver.LEASE_SEC)
        now = time.monotonic()
        for delivery in taken:
            w = delivery["webhook_id"]
            self.held[w] = self.held.get(w, 0) + 1
            if w not in self.active:
                self.caps[w] = FAILING_CAP if delivery["failing"] else HEALTHY_CAP
            self.queued.setdefault(w, deque()).append((now, delivery))
        for w in {d["webhook_id"] for d in taken}:
            self._start(w)
        if len(taken) >= room:
            self.wake.set()  # room filled: more may be due once some finish

    def _refillable(self, webhook_id: uuid.UUID, held: int) -> bool:
        """Whether a claim should take more for this endpoint: its queue has run dry (what it holds would all be
        running)."""
        return held <= self.caps.get(webhook_id, FAILING_CAP)

    def _start(self, w: uuid.UUID) -> None:
        """Start the endpoint's queued deliveries while it has a free slot (one that waited too long is handed
        back: its lease must outlast its attempt)."""
        queue = self.queued.get(w)
        loop = asyncio.get_running_loop()
        while queue and self.active.get(w, 0) < self.caps.get(w, FAILING_CAP) and not self.stopping:
            claimed, delivery = queue.popleft()
            if time.monotonic() - claimed > QUEUED_MAX_SEC:
                self._hand_back(w, delivery)
                continue
            self.active[w] = self.active.get(w, 0) + 1
            self.running[delivery["id"]] = loop.create_task(self._attempt(delivery))
        if not queue:
            self.queued.pop(w, None)

    def _hand_back(self, w: uuid.UUID, delivery: dict[str, Any]) -> None:
        self.handed_back.append(delivery["id"])
        self.have_outcomes.set()
        self._release_slot(w)

    def _release_slot(self, w: uuid.UUID) -> None:
        left = self.held.get(w, 1) - 1
        if left > 0:
            self.held[w] = left
        else:
            self.held.pop(w, None)
            if w not in self.active:
                self.caps.pop(w, None)

    async def _attempt(self, delivery: dict[str, Any]) -> None:
        w = delivery["webhook_id"]
        try:
            body = json.dumps(delivery["payload"], separators=(",", ":"), ensure_ascii=False)
            started = time.perf_counter()
            code, error, answer = await deliver.post(self.deps.outbound, delivery["url"], body,
                                                     deliver.signed_headers(delivery, body, clock.now()))
            outcome, delay = deliver.outcome(error, int(delivery["attempts"]) + 1)
            self.outcomes.append({
                **delivery, "status": outcome, "status_code": code, "error": error, "response": answer,
                "duration_ms": int((time.perf_counter() - started) * 1000),
                "next_attempt_at": clock.now() + timedelta(seconds=delay) if delay is not None else None})
            self.have_outcomes.set()
            if delay is not None:
                heapq.heappush(self.retries, time.monotonic() + delay)
            if error is None:
                self.caps[w] = HEALTHY_CAP
            elif self.caps.get(w) != FAILING_CAP:  # failing now: one attempt at a time, the queued ones back
                self.caps[w] = FAILING_CAP
                for _, queued in self.queued.pop(w, deque()):
                    self._hand_back(w, queued)
            self.sent += 1
        finally:
            self.running.pop(delivery["id"], None)
            running = self.active.get(w, 1) - 1
            if running > 0:
                self.active[w] = running
            else:
                self.active.pop(w, None)
            self._release_slot(w)
            if not self.stopping:
                self._start(w)  # the next queued delivery at once
                refill = self._refillable(w, self.held.get(w, 0)) and w not in self.asked
                if refill or sum(self.held.values()) == MAX_IN_FLIGHT - 1:
                    self.asked.add(w)
                    self.wake.set()

    # ------------------------------------------------------------------------------------------------ outcomes

    async def _write(self) -> None:
        failures = 0
        while True:
            await self.have_outcomes.wait()
            await asyncio.sleep(WRITE_EVERY_SEC)
            try:
                await self._flush(keep=failures < WRITE_TRIES - 1)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # kept and written with the next batch, up to WRITE_TRIES times
                failures += 1
                log.warning("could not record webhook attempts", error=f"{type(exc).__name__}: {exc}"[:300],
                            tries=failures)
                await asyncio.sleep(LISTEN_RETRY_SEC)

    async def _flush(self, keep: bool = True) -> None:
        """Write the outcomes gathered so far; on a failure they are kept for the next try unless `keep` is false
        (their leases then lapse and the deliveries are attempted again: at least once, never lost)."""
        self.have_outcomes.clear()
        batch, self.outcomes = self.outcomes, []
        back, self.handed_back = self.handed_back, []
        if not batch and not back:
            return
        try:
            failed = sorted({o["webhook_id"] for o in batch if o["status"] != "succeeded"})
            async with self.deps.db.transaction() as s:
                await webhook_store.release(s, back)
                await webhook_store.record_attempts(s, batch)
                if failed:
                    await webhook_store.disable_failing(s, failed, clock.now() - deliver.DISABLE_AFTER,
                                                        deliver.DISABLED_REASON)
            if back:
                self.wake.set()  # the handed-back deliveries are due again: claim now, not at the next sweep
            if batch:
                log.info("webhook attempts recorded", attempts=len(batch),
                         succeeded=sum(o["status"] == "succeeded" for o in batch),
                         retrying=sum(o["status"] == "retrying" for o in batch),
                         failed=sum(o["status"] == "failed" for o in batch))
        except BaseException:
            if keep:
                self.outcomes[:0] = batch
                self.handed_back[:0] = back
                self.have_outcomes.set()
            raise
