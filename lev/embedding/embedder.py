"""Text embedders: the `Embedder` interface, the bundled local model (`minilm`; queries: `query_graph`) and an
OpenAI-compatible adapter.

Embedding is synchronous and CPU/IO-bound; async callers run `embed` in a worker thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

import httpx

from lev.core.retry import retrying
from lev.core.settings import get_settings
from lev.embedding import query_graph
from lev.embedding.minilm import LOCAL_BATCH_SIZE, LOCAL_DIM, LOCAL_MODEL_NAME, PROBE_TEXT, load_model
from lev.ops.metrics import embedding_timer


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors of `dim` floats."""

    dim: int
    name: str

    def embed(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...

    def embed_queries(self, texts: list[str]) -> list[list[float]]: ...


def _normalize(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:
        return vec
    return [x / norm for x in vec]


_batch_sink: Callable[[list[str]], list[list[float]]] | None = None


def send_batches_to(sink: Callable[[list[str]], list[list[float]]] | None) -> None:
    """Where `LocalEmbedder.embed` sends its batches from now on (None: computed in this process)."""
    global _batch_sink
    _batch_sink = sink


class LocalEmbedder:
    """sentence-transformers all-MiniLM-L6-v2 on CPU, 384 dims, normalized."""

    dim = LOCAL_DIM
    name = f"local:{LOCAL_MODEL_NAME}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        sink = _batch_sink
        if sink is not None:  # an API process: batches go to the low-priority embedding process (embed_pool)
            return sink(texts)
        vectors = load_model().encode(
            texts,
            batch_size=LOCAL_BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        rows: list[list[float]] = vectors.tolist()
        return rows

    def embed_query(self, text: str) -> list[float]:
        return query_graph.embed_query(text)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return query_graph.embed_queries(texts)


class EmbeddingServiceError(RuntimeError):
    """The hosted embedding API failed or answered with something unusable."""


class OpenAIEmbedder:
    """Adapter for an OpenAI-compatible `POST {base}/embeddings` endpoint."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        dim: int,
        *,
        timeout: float = 30.0,
        batch_size: int = 128,
        backoff: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.dim = dim
        self.name = f"openai-compatible:{model}"
        self.batch_size = batch_size
        self._backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=5.0),
            trust_env=False,
        )

    def _post(self, batch: list[str]) -> dict[str, Any]:
        try:
            for attempt in retrying(self._backoff, max_wait=8.0):
                with attempt:
                    resp = self._client.post(f"{self.base_url}/embeddings", json={"model": self.model, "input": batch})
                    resp.raise_for_status()
                    data: dict[str, Any] = resp.json()
        except httpx.HTTPError as exc:
            raise EmbeddingServiceError(f"embedding service {self.base_url} failed: {exc}") from exc
        return data

    def embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            payload = self._post(batch)
            try:
                items = sorted(payload["data"], key=lambda d: d.get("index", 0))
                vectors = [_normalize([float(x) for x in item["embedding"]]) for item in items]
            except (KeyError, TypeError, ValueError) as exc:
                raise EmbeddingServiceError(f"embedding service returned a malformed body: {exc}") from exc
            if len(vectors) != len(batch):
                raise EmbeddingServiceError(
                    f"embedding service returned {len(vectors)} vectors for {len(batch)} inputs"
                )
            out.extend(vectors)
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self.embed(texts)

    def close(self) -> None:
        self._client.close()


class TimedEmbedder:
    """Any Embedder, with the time of every call recorded in the `lev_embedding_seconds` metric."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.name = inner.name

    def embed(self, texts: list[str]) -> list[list[float]]:
        with embedding_timer("chunks"):
            return self.inner.embed(texts)

    def embed_query(self, text: str) -> list[float]:
        with embedding_timer("query"):
            return self.inner.embed_query(text)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        with embedding_timer("query"):
            return self.inner.embed_queries(texts)


@lru_cache(maxsize=1)
def get_embedder() -> Embedder:
    """The configured embedder (`LEV_EMBEDDER`: local or openai), one per process, timed."""
    return TimedEmbedder(_configured_embedder())


def _configured_embedder() -> Embedder:
    s = get_settings()
    kind = s.embedder.lower()
    if kind == "local":
        return LocalEmbedder()
    if kind == "openai":
        if not s.embed_url:
            raise RuntimeError(
                "LEV_EMBEDDER=openai needs LEV_EMBED_URL (an OpenAI-compatible base ending in /v1)"
            )
        return OpenAIEmbedder(s.embed_url, s.embed_api_key, s.embed_model, s.embed_dim)
    raise RuntimeError(f"unknown LEV_EMBEDDER {s.embedder!r}; use 'local' or 'openai'")


def check_dimension(embedder: Embedder, expected: int | None = None) -> None:
    """Embed a probe string and fail loudly if the vector size differs from the database column."""
    want = get_settings().embed_dim if expected is None else expected
    got = len(embedder.embed_query(PROBE_TEXT))
    if got != want:
        raise RuntimeError(
            f"embedder {embedder.name} returns {got}-dimensional vectors; the database column is "
            f"vector({want}). Choose an embedding model that returns {want}-dimensional vectors "
            f"(LEV_EMBEDDER / LEV_EMBED_MODEL)."
        )
