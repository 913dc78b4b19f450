"""Documents for throughput and load runs: SciFact when it is beside the repo (read at run time), else generated."""

from __future__ import annotations

import json
import random

from bench.common import SCIFACT

_WORDS = ("cell protein gene expression tumour immune response receptor signalling pathway patients cohort "
          "trial dose mortality risk factor enzyme membrane mitochondria neuron cortex infection virus "
          "antibody vaccine therapy clinical outcome mouse model inhibition activation binding").split()


def documents(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """`n` (title, text) pairs."""
    corpus = SCIFACT / "corpus.jsonl"
    if corpus.exists():
        out = []
        with corpus.open() as f:
            for line in f:
                d = json.loads(line)
                if d.get("text"):
                    out.append((d.get("title") or "", d["text"]))
                if len(out) == n:
                    return out
    rnd = random.Random(seed)
    return [(" ".join(rnd.choices(_WORDS, k=6)).capitalize(),
             ". ".join(" ".join(rnd.choices(_WORDS, k=14)).capitalize() for _ in range(12)) + ".")
            for _ in range(n)]
