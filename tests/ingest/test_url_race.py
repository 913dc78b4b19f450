"""Two requests racing to store one URL: the loser links to the winner's content inside its own transaction and
still gets everything the first-come path gives (its AI outputs when it asked for them)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.sites import Site
from tests.stack import User, new_user


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def _outputs(c: Any, item_id: str, timeout: float = 90) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        outputs = c.get(f"/api/v1/items/{item_id}").json().get("outputs") or []
        if outputs or time.monotonic() > deadline:
            return outputs
        time.sleep(0.3)


def test_both_racers_for_one_url_get_their_transforms(server, api, admin, site: Site) -> None:
    """Both requests find no content before fetching (the site answers only once both are waiting), so both fetch
    and save; one insert wins the canonical URL and the other links to it, with its own transform queued."""
    users: list[User] = [new_user(admin), new_user(admin)]
    clients = [api(u.token(write=True)) for u in users]
    url = f"{site.url}/gate/race-{time.monotonic_ns()}"

    def add(c: Any) -> Any:
        return c.post("/api/v1/ingest", json={"kind": "url", "url": url, "auto_transform": True})

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(add, clients))
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    bodies = [a.json() for a in answers]
    assert bodies[0]["content_id"] == bodies[1]["content_id"], "one content, shared by both"
    assert {b["status"] for b in bodies} == {"ready"}
    assert site.hits.count(url.removeprefix(site.url)) == 2, "both fetched: the race really happened"
    for c, b in zip(clients, bodies, strict=True):
        kinds = {o["kind"] for o in _outputs(c, b["user_item_id"])}
        assert {"summary", "key_phrases"} <= kinds, (b, kinds)
