"""A fresh instance: the first account signed up is its owner's and gets `pro` (it can mint at once); every later
sign-up gets LEV_SIGNUP_TIER (free by default, refused with 402), also when the first sign-ups race."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.ops.test_crash import Stack
from tests.transcribe_stub import TranscribeStub

PASSWORD = "a long enough password"


@pytest.fixture(scope="module")
def fresh(transcribe_stub: TranscribeStub) -> Iterator[Stack]:
    s = Stack(transcribe_stub)
    s.start()
    yield s
    s.stop()


def _sign_up_and_mint(url: str, n: int) -> tuple[str, int]:
    with httpx.Client(base_url=url, timeout=60) as c:
        r = c.post("/api/account/signup", json={"email": f"racer{n}@example.com", "password": PASSWORD})
        assert r.status_code == 201, r.text
        tier = c.get("/api/account").json()["tier"]
        minted = c.post("/api/account/tokens", json={"name": "agent"},
                        headers={"X-CSRF-Token": r.json()["csrf_token"]})
        return tier, minted.status_code


def test_first_sign_up_owns_the_instance_and_later_ones_are_free(fresh: Stack) -> None:
    assert fresh.server is not None
    url = fresh.server.url
    first = httpx.get(f"{url}/", timeout=60)  # a server with no account opens on creating the first one
    assert first.status_code == 200 and 'data-api="POST /api/account/signup"' in first.text, first.text[-1500:]
    assert 'data-lev="first-account"' in first.text and "<h1>Create your Lev account</h1>" in first.text
    with ThreadPoolExecutor(5) as pool:  # five people race for an empty instance: exactly one becomes its owner
        results = list(pool.map(lambda n: _sign_up_and_mint(url, n), range(5)))
    assert sorted(results) == [("free", 402)] * 4 + [("pro", 201)], results
    tiers = fresh.sql("SELECT tier, count(*) FROM users GROUP BY tier ORDER BY tier")
    assert tiers == [("free", 4), ("pro", 1)]
    later, status = _sign_up_and_mint(url, 99)
    assert (later, status) == ("free", 402)
    assert 'data-api="POST /api/account/login"' in httpx.get(f"{url}/", timeout=60).text  # now it opens on sign-in
