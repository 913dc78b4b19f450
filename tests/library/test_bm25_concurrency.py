"""BM25 statistics stay exact while ingests and deletes run concurrently (in a file of its own: the slowest test of
test_search_bm25.py, so a parallel run spreads them)."""

from __future__ import annotations

from tests.library.test_search_bm25 import CHECK


def test_concurrent_ingest_and_delete_never_deadlock(server, api, user, admin) -> None:
    from concurrent.futures import ThreadPoolExecutor

    c = api(user.token(write=True))
    import random

    vocab = [f"{a}{b}{c}" for a in "bdfgklmnprst" for b in "aeiou" for c in ("ra", "lo", "ven", "mid")]

    def ingest(i: int) -> tuple[int, str]:
        rnd = random.Random(i)  # different words in different orders per chunk: term locks overlap unevenly
        text = " ".join(rnd.choice(vocab) for _ in range(420)) + f" marsh survey {i}."
        r = c.post("/api/v1/ingest", json={"kind": "text", "title": f"Wading birds {i}", "text": text,
                                           "auto_transform": False})
        return r.status_code, r.json().get("user_item_id", "")

    with ThreadPoolExecutor(8) as pool:
        first = list(pool.map(ingest, range(64)))
    assert {s for s, _ in first} == {200}
    victims = [i for _, i in first[:12]]
    with ThreadPoolExecutor(6) as pool:
        deletes = pool.map(lambda i: c.delete(f"/api/v1/items/{i}").status_code, victims)
        more = pool.map(ingest, range(64, 76))
        assert set(deletes) == {200} and {s for s, _ in more} == {200}
    row = admin.sql(CHECK)[0]
    assert row.totals_ok and row.df_missing == 0 and row.df_extra == 0 and row.postings_ok
