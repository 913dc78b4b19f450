"""The bundled model (ONNX Runtime, float16 weights, no torch) gives the vectors sentence-transformers gave with
the original all-MiniLM-L6-v2 weights, stored in reference_vectors.json by `lev.embedding.export`: vectors already
in a database stay valid, nobody re-embeds. Every path is checked: a batch on the ingest threads (runs computed on
several niced threads at once), a query on the caller's thread."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lev.embedding.embedder import LocalEmbedder
from lev.embedding.minilm import LOCAL_MAX_SEQ_LENGTH, MODEL_FILE, tokenizer

REFERENCE = json.loads((Path(__file__).parent / "reference_vectors.json").read_text())
TEXTS = [r["text"] for r in REFERENCE["texts"]]
VECTORS = np.asarray([r["vector"] for r in REFERENCE["texts"]], dtype=np.float64)
MIN_COSINE = 0.9999


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def _check(got: list[list[float]]) -> None:
    arr = np.asarray(got, dtype=np.float64)
    assert arr.shape == VECTORS.shape
    assert np.allclose(np.linalg.norm(arr, axis=1), 1.0, atol=1e-4)
    cosines = (arr * VECTORS).sum(axis=1) / np.linalg.norm(VECTORS, axis=1)
    for text, c in zip(TEXTS, cosines, strict=True):
        assert c >= MIN_COSINE, (text[:60], float(c))


def test_the_reference_covers_short_long_unicode_and_empty_texts() -> None:
    assert REFERENCE["model"] == "sentence-transformers/all-MiniLM-L6-v2" and REFERENCE["max_seq_length"] == 256
    lengths = [len(tokenizer().encode(t).ids) for t in TEXTS]
    assert sum(n > LOCAL_MAX_SEQ_LENGTH for n in lengths) >= 2  # truncated at 256 wordpieces
    assert any(not t.strip() for t in TEXTS) and "" in TEXTS  # empty-ish: [CLS] [SEP] only
    assert any(ord(ch) > 0x3000 for t in TEXTS for ch in t)  # CJK and beyond
    assert VECTORS.shape[1] == 384


def test_a_batch_gives_the_reference_vectors(local: LocalEmbedder) -> None:
    _check(local.embed(TEXTS))


def test_queries_give_the_reference_vectors(local: LocalEmbedder) -> None:
    _check([local.embed_query(t) for t in TEXTS])
    _check(local.embed_queries(TEXTS))


def test_niced_ingest_threads_give_the_reference_vectors() -> None:
    emb = LocalEmbedder(threads=3, nice=4)
    emb.start()
    try:
        _check(emb.embed(TEXTS))
    finally:
        emb.close()


def test_the_model_ships_in_half_precision_with_its_licence() -> None:
    size = MODEL_FILE.stat().st_size
    assert 40e6 < size < 50e6, size  # 22.7M parameters, the matrices in float16
    assert "Apache License" in (MODEL_FILE.parent / "LICENSE").read_text()
    assert "all-MiniLM-L6-v2" in (MODEL_FILE.parent / "NOTICE").read_text()
