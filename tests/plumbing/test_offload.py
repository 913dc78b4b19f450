"""The offload pool's children have a deadline (issue 47 item 1): a call past it, or one whose caller gives up, has
its child killed and replaced while the other calls go on; before, an abandoned pathological input kept one of the
pool's two children busy to its end. Inputs above the small-input threshold never run on the event loop's
process: a regular expression there holds the GIL, and the loop with it."""

from __future__ import annotations

import asyncio
import os
import re
import time

import psutil
import pytest

from lev.plumbing import offload


def spin(seconds: float) -> int:
    """Busy for `seconds`; the child's pid."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return os.getpid()


def backtrack(text: str) -> bool:
    """A quadratic search in one call into the regular expression engine (which holds the GIL throughout)."""
    return re.search(r"<title[^>]*>(.*?)</title\s*>", text, re.DOTALL) is not None


@pytest.fixture(autouse=True)
def fresh_pool():  # type: ignore[no-untyped-def]
    offload.configure(2, 0)
    yield
    offload.shutdown()


def test_a_call_past_its_deadline_is_stopped_and_the_other_goes_on() -> None:
    async def main() -> tuple[float, int]:
        started = time.monotonic()
        slow = asyncio.ensure_future(offload.run(spin, 600.0, size=10**6, deadline=3))
        other = asyncio.ensure_future(offload.run(spin, 1.0, size=10**6))
        with pytest.raises(offload.OffloadFailed, match="longer than 3 s"):
            await slow
        took = time.monotonic() - started
        return took, await other

    took, pid = asyncio.run(main())
    assert took < 120, took  # 600 s of work before
    assert pid > 0


def test_a_cancelled_call_kills_its_child() -> None:
    async def main() -> set[int]:
        await asyncio.gather(*(offload.run(spin, 0.5, size=10**6) for _ in range(2)))  # both children up
        before = {p.pid for p in psutil.Process().children()}
        call = asyncio.ensure_future(offload.run(spin, 600.0, size=10**6))
        await asyncio.sleep(3)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        assert await offload.run(spin, 0.0, size=10**6) > 0  # the pool goes on
        return before

    before = asyncio.run(main())
    deadline = time.monotonic() + 60
    while before <= {p.pid for p in psutil.Process().children()}:  # the child on the abandoned input is gone
        assert time.monotonic() < deadline, before
        time.sleep(0.5)


def test_a_mid_sized_input_never_holds_the_event_loop() -> None:
    """A 31 KB input (the old threshold was 64 KB) went to a thread of this process: a quadratic search in it held
    the GIL, and every request of the process waited (tens of seconds here)."""
    text = "<title>" * 4_500  # 31,500 characters

    async def main() -> float:
        worst = 0.0
        work = asyncio.ensure_future(offload.run(backtrack, text, size=len(text), deadline=600))
        last = time.monotonic()
        while not work.done():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            worst, last = max(worst, now - last), now
        assert await work is False
        return worst

    worst = asyncio.run(main())
    assert worst < 1.0, worst
