"""Query embeddings of the local model: MiniLM with its pooling and norm, exported to ONNX once (by the ingest
process, `save_query_graph`) and run with ONNX Runtime, alone or in runs of similar length. A process that
loads the file never imports torch."""

from __future__ import annotations

import os
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

from lev.embedding.minilm import LOCAL_MAX_SEQ_LENGTH, PROBE_TEXT, load_model, model_dir, tokenizer

# A run of batched queries holds queries up to this many times its shortest (in tokens, plus 2): a random batch of
# 16 SciFact claims padded to its longest cost 12.0 ms CPU per query, in runs of similar length 7.2 (TUNING §6).
BATCH_SLACK = 1.3

_query_lock = threading.Lock()


def _pooled_model() -> Any:
    """The model with mean pooling over the tokens and the L2 norm: the same maths as `encode`, as one module."""
    import torch

    transformer: Any = load_model()[0]
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
    global _query_graph_file, _graph
    _query_graph_file, _graph = path, None


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


class _QueryGraph:
    """The query graph in an ONNX Runtime session, with its own tokenizer (configured once: sharing the batch
    path's would flip its truncation and padding state between concurrent calls).

    Same weights and maths as `encode` (vectors equal to about 2e-7), in about half the time of a TorchScript
    copy and without torch in the process (bench/TUNING.md, issue 18); the session releases the GIL while it
    runs, so it overlaps with the event loop.
    """

    def __init__(self, path: Path | None) -> None:
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(LOCAL_MAX_SEQ_LENGTH)
        self.session = _query_session(path)

    def run(self, rows: list[list[int]]) -> list[list[float]]:
        """Token rows padded to the longest: the mask keeps padding out of the attention and the pooling (nothing
        in the graph depends on the batch or the length)."""
        import numpy as np

        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        out: list[list[float]] = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0].tolist()
        return out

    def embed(self, texts: list[str]) -> list[list[float]]:
        """In runs of similar length: a run only takes queries up to `BATCH_SLACK` times its shortest, since
        padding costs as much as tokens."""
        rows = [self.tok.encode(text.strip()).ids for text in texts]
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        vectors: list[list[float]] = [[] for _ in rows]
        start = 0
        while start < len(order):
            limit = BATCH_SLACK * len(rows[order[start]]) + 2
            end = start + 1
            while end < len(order) and len(rows[order[end]]) <= limit:
                end += 1
            run = order[start:end]
            for i, vec in zip(run, self.run([rows[i] for i in run]), strict=True):
                vectors[i] = vec
            start = end
        return vectors


_graph: _QueryGraph | None = None


def _loaded() -> _QueryGraph:
    global _graph
    if _graph is None:
        with _query_lock:
            if _graph is None:
                _graph = _QueryGraph(_query_graph_file)
    return _graph


def load() -> None:
    """Build (or load) the query graph now rather than at the first query."""
    _loaded()


def embed_query(text: str) -> list[float]:
    """One query's vector."""
    return _loaded().embed([text])[0]


def embed_queries(texts: list[str]) -> list[list[float]]:
    """Several queries' vectors (in runs of similar length)."""
    return _loaded().embed(texts)
