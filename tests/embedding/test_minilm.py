"""lev.embedding.minilm: how a batch is cut into runs (similar lengths, bounded in texts and tokens, spread over
threads), and that a text's vector does not depend on the run it lands in."""

from __future__ import annotations

import numpy as np

from lev.embedding.minilm import BATCH_SLACK, RUN_TOKENS, MiniLM, runs


def test_runs_hold_texts_of_similar_length() -> None:
    lengths = [10, 200, 11, 12, 205, 60]
    got = runs(lengths, max_batch=32)
    assert sorted(i for r in got for i in r) == list(range(len(lengths)))  # every text once
    for r in got:
        shortest = min(lengths[i] for i in r)
        assert all(lengths[i] <= BATCH_SLACK * shortest + 2 for i in r)
    assert [sorted(r) for r in got] == [[0, 2, 3], [5], [1, 4]]


def test_runs_are_bounded_in_texts_and_tokens() -> None:
    assert [len(r) for r in runs([20] * 40, max_batch=16)] == [16, 16, 8]
    long = runs([256] * 20, max_batch=32)
    assert all(len(r) * 256 <= RUN_TOKENS for r in long) and sum(len(r) for r in long) == 20


def test_a_small_batch_is_spread_over_threads() -> None:
    assert len(runs([100, 101, 102], max_batch=32)) == 1
    spread = runs([100, 101, 102], max_batch=32, at_least=2)
    assert len(spread) == 2 and sorted(i for r in spread for i in r) == [0, 1, 2]
    assert len(runs([100], max_batch=32, at_least=4)) == 1  # one text cannot be split


def test_a_vector_does_not_depend_on_its_run() -> None:
    model = MiniLM()
    texts = ["bees dance", "how do honeybees tell each other where the flowers are", "x", "a " * 300]
    together = model.embed(texts)
    for i, text in enumerate(texts):
        alone = model.embed([text])[0]
        assert np.abs(alone - together[i]).max() < 1e-5
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
