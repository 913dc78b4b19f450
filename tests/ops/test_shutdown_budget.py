"""A stopping process's closing steps share what is left of the grace period: each is bounded by its own timeout and
by the deadline less the time kept for the embedded servers' stop (`runtime.closing_time`), so several slow parts
on a loaded machine cannot together push the stop past the grace and into the watchdog."""

from __future__ import annotations

import asyncio
import time

import pytest

from lev import runtime


def test_closing_steps_leave_the_servers_their_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_shutdown_deadline", None)
    monkeypatch.setattr(runtime, "_stop_signal", None)
    assert runtime.closing_time(2.0) == 2.0  # not stopping: a step's own bound
    runtime.begin_shutdown(2.5)
    assert runtime.closing_time(2.0) <= 2.5 - runtime.SERVERS_STOP_SEC

    async def three_hanging_parts() -> float:
        started = time.monotonic()
        for _ in range(3):  # each would hang past its own 2 s bound
            await runtime._bounded("a part that hangs", asyncio.sleep(30), 2.0)
        return time.monotonic() - started

    took = asyncio.run(three_hanging_parts())
    assert took <= 2.5 - runtime.SERVERS_STOP_SEC + 0.3, took  # each step its own 2 s: 6 s
    assert runtime.time_left(0.0) >= runtime.SERVERS_STOP_SEC - 0.3  # what the servers' stop still has
