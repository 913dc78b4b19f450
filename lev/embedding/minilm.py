"""The bundled local model, all-MiniLM-L6-v2 (Apache-2.0): its files in `model/` (the ONNX graph with mean pooling
and the L2 norm, the tokenizer, the licence), its wordpiece tokenizer, and `MiniLM`, the model in an ONNX Runtime
session. Nothing here imports torch, transformers or sentence-transformers."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Iterable
from concurrent.futures import Executor
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from lev.core.packagedata import packaged

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MODEL_DIR = packaged("embedding", "model")
MODEL_FILE = MODEL_DIR / "all-MiniLM-L6-v2.onnx"  # written by lev.embedding.export
TOKENIZER_FILE = MODEL_DIR / "tokenizer.json"

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
LOCAL_DIM = 384
LOCAL_MAX_SEQ_LENGTH = 256
LOCAL_BATCH_SIZE = 32
PROBE_TEXT = "Lev embedding dimension probe."

# A run holds texts up to this many times its shortest (in tokens, plus 2): padding costs as much as tokens. A
# random batch of 16 SciFact claims padded to its longest cost 12.0 ms CPU per query, in runs of similar length 7.2
# (bench/TUNING.md §6).
BATCH_SLACK = 1.3
# At most this many tokens (rows x width) in one run: a run's activations (the attention's scores grow with
# rows x width²) are allocated while it runs.
RUN_TOKENS = 2048


@lru_cache(maxsize=1)
def tokenizer() -> Tokenizer:
    """The MiniLM wordpiece tokenizer (the model's tokenizer.json) without truncation or padding, for chunk sizing."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER_FILE))
    tok.no_truncation()
    tok.no_padding()
    return tok


def return_freed_memory() -> None:
    """Fix glibc's mmap threshold at 128 KiB: a freed activation of a batch goes back to the system instead of
    staying in the heap (glibc raises the threshold after such frees, so later big blocks come from the heap and
    the process keeps them). About 75 MiB less resident memory after batches of 16 queries (bench/TUNING.md,
    issue 18). No-op off glibc."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):  # musl and others: nothing to tune
        pass


def session_options(threads: int, *, arena: bool) -> Any:
    """ONNX Runtime options: `threads` for one run (0: one per core), threads that sleep instead of spinning while
    they wait (on a small machine spinning takes the CPU from PostgreSQL and the event loop), and the memory arena
    on or off (off: a run's buffers go back to the allocator when it ends)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(0, threads)
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = arena
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only
    return options


def runs(lengths: list[int], max_batch: int, at_least: int = 1) -> list[list[int]]:
    """Indexes of texts grouped into runs of similar length: sorted by length, a run takes texts up to
    `BATCH_SLACK` times its shortest, at most `max_batch` of them and `RUN_TOKENS` tokens in all (padded). The
    largest runs are then halved until there are `at_least` runs (or one text in each), so that a small batch
    still keeps that many threads busy."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out: list[list[int]] = []
    start = 0
    while start < len(order):
        limit = BATCH_SLACK * lengths[order[start]] + 2
        end = start + 1
        while (end < len(order) and end - start < max_batch and lengths[order[end]] <= limit
               and (end - start + 1) * lengths[order[end]] <= RUN_TOKENS):
            end += 1
        out.append(order[start:end])
        start = end
    while len(out) < at_least:
        largest = max(out, key=len)
        if len(largest) < 2:
            break
        out.remove(largest)
        half = len(largest) // 2
        out += [largest[:half], largest[half:]]
    return out


class MiniLM:
    """all-MiniLM-L6-v2 in an ONNX Runtime session, with its own tokenizer (configured once: truncation at 256
    wordpieces, no padding).

    The texts are stripped, tokenized and embedded in runs of similar length (`runs`), each padded to its longest:
    the attention mask keeps the padding out of the attention and the pooling, so a text's vector does not depend
    on its run. Same tokens, truncation, mean pooling and norm as `SentenceTransformer.encode`
    (tests/embedding/test_reference_vectors.py). One session serves several threads at once (ONNX Runtime's `run`
    is thread-safe and releases the GIL); with `threads` 1 a run computes on its caller's thread alone, at that
    thread's CPU priority.
    """

    def __init__(self, threads: int = 1, *, arena: bool = False) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(TOKENIZER_FILE))
        self.tok.no_padding()
        self.tok.enable_truncation(LOCAL_MAX_SEQ_LENGTH)
        self.session = ort.InferenceSession(str(MODEL_FILE), session_options(threads, arena=arena),
                                            providers=["CPUExecutionProvider"])

    def run(self, rows: list[list[int]]) -> np.ndarray:
        """The vectors of token rows, padded to the longest (one session run)."""
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        out: np.ndarray = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return out

    def embed(self, texts: list[str], max_batch: int = LOCAL_BATCH_SIZE, executor: Executor | None = None,
              spread: int = 1) -> np.ndarray:
        """Unit vectors of `texts` (float32, one row each, in order). The runs compute on `executor`'s threads
        when given (several at once, in at least `spread` runs when there are that many texts), else on the
        caller's thread."""
        vectors = np.zeros((len(texts), LOCAL_DIM), dtype=np.float32)
        if not texts:
            return vectors
        rows = [e.ids for e in self.tok.encode_batch([t.strip() for t in texts])]
        groups = runs([len(r) for r in rows], max_batch, spread)

        def one(group: list[int]) -> np.ndarray:
            return self.run([rows[i] for i in group])

        done: Iterable[np.ndarray] = executor.map(one, groups) if executor is not None else map(one, groups)
        for group, out in zip(groups, done, strict=True):
            vectors[group] = out
        return vectors
