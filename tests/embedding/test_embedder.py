"""lev.embedding.embedder: the bundled MiniLM model and the OpenAI-compatible adapter (stand-in on 127.0.0.1)."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lev.core.settings import Settings
from lev.embedding.embedder import (
    EmbeddingServiceError,
    LocalEmbedder,
    OpenAIEmbedder,
    TimedEmbedder,
    build_embedder,
    check_dimension,
)
from lev.embedding.minilm import tokenizer


class EmbeddingsStandIn:
    """POST /v1/embeddings returning `dim`-sized, deliberately unnormalised vectors in reverse order.

    `failures` is a list of HTTP status codes answered (in order) before the first success.
    """

    def __init__(self, dim: int, failures: list[int] | None = None) -> None:
        self.dim = dim
        self.failures = list(failures or [])
        self.requests: list[dict[str, Any]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                stand_in.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": json.loads(raw)}
                )
                if stand_in.failures:
                    self.reply(stand_in.failures.pop(0), {"error": {"message": "try later"}})
                    return
                inputs = json.loads(raw)["input"]
                data = [
                    {"object": "embedding", "index": i, "embedding": stand_in.vector(i)}
                    for i in range(len(inputs))
                ]
                self.reply(200, {"object": "list", "data": data[::-1], "model": "stand-in"})

            def reply(self, code: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def vector(self, i: int) -> list[float]:
        vec = [0.0] * self.dim
        vec[0], vec[1 % self.dim] = 3.0, 4.0 + i  # norm != 1; differs per input
        return vec

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stand_in_384() -> Iterator[EmbeddingsStandIn]:
    s = EmbeddingsStandIn(384, failures=[429])
    yield s
    s.close()


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def test_local_embedder_shape_norm_and_similarity(local: LocalEmbedder) -> None:
    texts = [
        "The cat sat on the mat.",
        "A kitten is sitting on a rug.",
        "Quarterly revenue grew by eight percent in Europe.",
    ]
    vecs = local.embed(texts)
    assert local.dim == 384 and len(vecs) == 3
    for v in vecs:
        assert len(v) == 384
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-4)
    assert cos(vecs[0], vecs[1]) > cos(vecs[0], vecs[2]) + 0.2
    assert local.embed([]) == []
    q = local.embed_query("cat on a mat")
    assert cos(q, vecs[0]) > cos(q, vecs[2])
    assert "all-MiniLM-L6-v2" in local.name
    check_dimension(local, 384)
    with pytest.raises(RuntimeError, match="returns 384-dimensional vectors; the database column is vector"):
        check_dimension(local, 768)


def test_local_embedder_is_loaded_once_across_threads() -> None:
    emb = LocalEmbedder()
    results: list[list[float]] = []
    models: list[object] = []

    def work() -> None:
        results.append(emb.embed_query("x"))
        models.append(emb.model())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(r == results[0] for r in results)
    assert len(models) == 4 and all(m is models[0] for m in models)  # one session, loaded once


def test_local_query_path_matches_the_batch_path(local: LocalEmbedder) -> None:
    """A batch runs its texts in runs of similar length, padded: every vector must equal the text's alone."""
    texts = ["x", "cat on a mat", "  padded with spaces\n", "Ünïcode — naïve café 東京",
             "vitamin D deficiency and the risk of fractures in older adults " * 3,
             "a long document that is truncated at 256 wordpieces " * 80]
    batch = local.embed(texts)
    for text, expected in zip(texts, batch, strict=True):
        got = local.embed_query(text)
        assert len(got) == 384
        assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < 1e-5, text
    assert cos(local.embed_query(texts[1]), batch[2]) < 0.99  # different texts really differ


def test_tokenizer_counts_without_truncation() -> None:
    tok = tokenizer()
    enc = tok.encode("Hello world")
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]"
    long = "word " * 1000
    assert len(tok.encode(long).ids) == 1002


def test_openai_embedder_retries_429_and_normalises(stand_in_384: EmbeddingsStandIn) -> None:
    emb = OpenAIEmbedder(stand_in_384.base, "sk-test", "text-embedding-3-small", 384, backoff=0.01)
    try:
        vecs = emb.embed(["first", "second"])
    finally:
        emb.close()
    assert len(stand_in_384.requests) == 2  # one 429, then success
    req = stand_in_384.requests[-1]
    assert req["path"] == "/v1/embeddings"
    assert req["auth"] == "Bearer sk-test"
    assert req["body"] == {"model": "text-embedding-3-small", "input": ["first", "second"]}
    assert len(vecs) == 2 and all(len(v) == 384 for v in vecs)
    # re-ordered by index and normalised: input 0 is (3, 4) -> (0.6, 0.8)
    assert vecs[0][:2] == pytest.approx([0.6, 0.8])
    assert vecs[1][:2] == pytest.approx([3 / math.sqrt(34), 5 / math.sqrt(34)])
    assert emb.name == "openai-compatible:text-embedding-3-small"


def test_openai_embedder_gives_up_after_three_retries() -> None:
    s = EmbeddingsStandIn(8, failures=[500, 502, 503, 500, 500])
    emb = OpenAIEmbedder(s.base, None, "m", 8, backoff=0.01)
    try:
        with pytest.raises(EmbeddingServiceError):
            emb.embed(["x"])
        assert len(s.requests) == 4
        assert s.requests[0]["auth"] is None
    finally:
        emb.close()
        s.close()


def test_check_dimension_rejects_512_dim_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    s = EmbeddingsStandIn(512)
    monkeypatch.setenv("LEV_EMBEDDER", "openai")
    monkeypatch.setenv("LEV_EMBED_URL", s.base)
    monkeypatch.setenv("LEV_EMBED_MODEL", "big-model")
    timed = build_embedder(Settings())
    try:
        assert isinstance(timed, TimedEmbedder)
        emb = timed.inner
        assert isinstance(emb, OpenAIEmbedder) and emb.name == "openai-compatible:big-model"
        with pytest.raises(RuntimeError) as info:
            check_dimension(timed)
        msg = str(info.value)
        assert "embedder openai-compatible:big-model returns 512-dimensional vectors" in msg
        assert "the database column is vector(384)" in msg
        assert s.requests and s.requests[0]["body"]["model"] == "big-model"
    finally:
        timed.close()
        s.close()


def test_build_embedder_defaults_to_local_with_its_ingest_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEV_EMBEDDER", raising=False)
    monkeypatch.setenv("LEV_INGEST_EMBED_THREADS", "3")
    plain = build_embedder(Settings())
    assert isinstance(plain, TimedEmbedder) and isinstance(plain.inner, LocalEmbedder)
    assert plain.inner.ingest.nice == 0 and plain.inner.ingest.threads == 3
    niced = build_embedder(Settings(), ingest_nice=4)  # an API process's
    assert isinstance(niced, TimedEmbedder) and isinstance(niced.inner, LocalEmbedder)
    assert niced.inner.ingest.nice == 4
    assert build_embedder(Settings()) is not plain  # one per call: the composition root builds it once
    monkeypatch.setenv("LEV_EMBEDDER", "nonsense")
    with pytest.raises(RuntimeError, match="unknown LEV_EMBEDDER"):
        build_embedder(Settings())
