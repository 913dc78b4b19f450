"""Text embedders: the `Embedder` interface, the bundled local model (`minilm`; batches on `pool`'s ingest threads)
and an OpenAI-compatible adapter.

Embedding is synchronous and CPU/IO-bound; async callers run `embed` in a worker thread. The composition root
builds one embedder per process (`build_embedder`), starts it, and hands it to whoever embeds.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Any

import httpx

from lev.core.retry import retrying
from lev.core.settings import Settings
from lev.embedding.minilm import LOCAL_DIM, LOCAL_MODEL_NAME, PROBE_TEXT, MiniLM
from lev.embedding.pool import IngestThreads
from lev.ops.metrics import embedding_timer
from lev.plumbing.ports import Embedder
from lev.store.models import EMBEDDING_DIM


def _normalize(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:
        return vec
    return [x / norm for x in vec]


class LocalEmbedder:
    """all-MiniLM-L6-v2 with ONNX Runtime (`minilm.MiniLM`), 384 dims, normalized.

    One session, loaded once (at `start` or at the first embedding), computes every run on the thread that asks:
    queries on the caller's thread (the query batcher's, at the server's priority), batches (ingest, the local
    transformer) on this embedder's ingest threads, `threads` of them at CPU niceness +`nice` (`IngestThreads`),
    several runs of a batch at once. Thread-safe.
    """

    dim = LOCAL_DIM
    name = f"local:{LOCAL_MODEL_NAME}"

    def __init__(self, threads: int = 0, nice: int = 0) -> None:
        self.ingest = IngestThreads(threads or os.cpu_count() or 1, nice)
        self._model: MiniLM | None = None
        self._lock = threading.Lock()

    def model(self) -> MiniLM:
        """This embedder's session (loaded on first use)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = MiniLM()
        return self._model

    def start(self) -> None:
        self.model()

    def close(self) -> None:
        self.ingest.shutdown(wait=True, cancel_futures=True)

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        rows: list[list[float]] = self.model().embed(texts, executor=self.ingest, spread=self.ingest.threads).tolist()
        return rows

    def embed_query(self, text: str) -> list[float]:
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        rows: list[list[float]] = self.model().embed(texts, max_batch=len(texts)).tolist()
        return rows


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

    def start(self) -> None:
        """Nothing to load: the provider holds the model."""

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

    def start(self) -> None:
        self.inner.start()

    def close(self) -> None:
        self.inner.close()


def build_embedder(settings: Settings, ingest_nice: int = 0) -> Embedder:
    """The configured embedder (`LEV_EMBEDDER`: local or openai), timed, not started yet. The local one embeds
    batches on `LEV_INGEST_EMBED_THREADS` threads at CPU niceness +`ingest_nice`."""
    kind = settings.embedder.lower()
    if kind == "local":
        return TimedEmbedder(LocalEmbedder(settings.ingest_embed_threads, ingest_nice))
    if kind == "openai":
        if not settings.embed_url:
            raise RuntimeError(
                "LEV_EMBEDDER=openai needs LEV_EMBED_URL (an OpenAI-compatible base ending in /v1)"
            )
        return TimedEmbedder(OpenAIEmbedder(settings.embed_url, settings.embed_api_key, settings.embed_model,
                                            EMBEDDING_DIM))
    raise RuntimeError(f"unknown LEV_EMBEDDER {settings.embedder!r}; use 'local' or 'openai'")


def check_dimension(embedder: Embedder, expected: int = EMBEDDING_DIM) -> None:
    """Embed a probe string and fail loudly if the vector size differs from the database column."""
    got = len(embedder.embed_query(PROBE_TEXT))
    if got != expected:
        raise RuntimeError(
            f"embedder {embedder.name} returns {got}-dimensional vectors; the database column is "
            f"vector({expected}). Choose an embedding model that returns {expected}-dimensional vectors "
            f"(LEV_EMBEDDER / LEV_EMBED_MODEL)."
        )
