"""lev.mcp.budget without a server: a search answer is cut to its budget longest-first, notes too, in a few passes
whatever its size (issue 47's audit: 50 highlight hits of 20,000 characters with 10,000-character notes took 6.3 s
of the event loop, cut 20 % at a time with the whole answer serialised twice a step)."""

from __future__ import annotations

import time

from lev.mcp import budget


def hit(n: int, text_chars: int, note_chars: int = 0) -> dict[str, object]:
    h: dict[str, object] = {"item_id": f"item-{n}", "title": f"Title {n}",
                            "text": ("word é " * text_chars)[:text_chars],
                            "location": {"char_start": 1000 * n, "char_end": 1000 * n + text_chars}}
    if note_chars:
        h["note"] = ("note \" " * note_chars)[:note_chars]
    return h


def test_a_huge_answer_is_cut_to_its_budget_at_once_notes_included() -> None:
    answer = {"mode": "hybrid", "results": [hit(n, 20_000, 10_000) for n in range(50)]}
    started = time.perf_counter()
    cut = budget.fit_search(answer, 50)
    assert time.perf_counter() - started < 2  # 6.3 s before
    assert budget.wire_bytes(cut) <= budget.SEARCH_BYTES * 5
    for before, after in zip(answer["results"], cut["results"], strict=True):  # type: ignore[arg-type]
        assert after["truncated"] is True and before["text"].startswith(after["text"])
        assert before["note"].startswith(after["note"])
        assert after["location"]["char_end"] == after["location"]["char_start"] + len(after["text"])
    assert answer["results"][0]["text"] == hit(0, 20_000)["text"]  # the caller's answer is left as it was


def test_only_the_longest_are_cut_and_a_small_answer_is_left_alone() -> None:
    small = {"mode": "keyword", "results": [hit(n, 300) for n in range(10)]}
    assert budget.fit_search(small, 10) == small
    mixed = {"mode": "keyword", "results": [hit(0, 60_000), hit(1, 500), hit(2, 400)]}
    cut = budget.fit_search(mixed, 10)
    assert budget.wire_bytes(cut) <= budget.SEARCH_BYTES
    assert [r.get("truncated", False) for r in cut["results"]] == [True, False, False]
    assert len(cut["results"][0]["text"]) > 5_000  # cut to what fits, not to the bone
