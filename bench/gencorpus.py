"""A generated library of distinct, realistic chunks for the filtered-search bench (issue 49): SciFact's abstracts
cut into sentences, each sentence embedded by Lev's own model (all-MiniLM-L6-v2), and chunks made of 1, 2 or 3
consecutive sentences of one abstract.

A chunk of several sentences gets the normalised mean of its sentences' vectors. MiniLM pools its token vectors
by their mean, so a passage's vector is close to the mean of its sentences' (`check_mean` measures how close on a
sample: about 0.9 cosine to the model's own vector of the passage); embedding 100,000 passages outright takes over
an hour on this machine, the 45,000 sentences about 20 minutes, once (cached under /tmp/lev-bench-cache).

Every chunk's text and vector are distinct (no perturbed copies): HNSW's recall here is that of a real library,
which the bench measures unfiltered next to the filtered figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.common import SCIFACT
from bench.scifact import load_data

CACHE = Path("/tmp/lev-bench-cache")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")
MIN_CHARS = 20


@dataclass(frozen=True)
class Doc:
    title: str
    sentences: list[str]
    first: int  # index of its first sentence in the vectors


def docs() -> list[Doc]:
    """SciFact's abstracts as sentences (fragments under MIN_CHARS joined to the next)."""
    corpus, _, _ = load_data(SCIFACT)
    out, n = [], 0
    for title, text in corpus.values():
        parts: list[str] = []
        carry = ""
        for s in _SENTENCE.split(text.strip()):
            s = (carry + " " + s).strip() if carry else s.strip()
            if len(s) < MIN_CHARS:
                carry = s
                continue
            parts.append(s)
            carry = ""
        if carry and parts:
            parts[-1] += " " + carry
        if parts:
            out.append(Doc(title, parts, n))
            n += len(parts)
    return out


def sentence_vectors(all_docs: list[Doc]) -> np.ndarray:
    """Every sentence's vector, embedded once and cached."""
    count = sum(len(d.sentences) for d in all_docs)
    cache = CACHE / f"filtered-sentences-{count}.npy"
    if cache.exists():
        return np.load(cache)
    from lev.embedding.embedder import LocalEmbedder

    texts = [s for d in all_docs for s in d.sentences]
    vectors = np.asarray(LocalEmbedder().embed(texts), dtype=np.float32)
    CACHE.mkdir(exist_ok=True)
    np.save(cache, vectors)
    return vectors


def chunks(n: int) -> list[tuple[Doc, list[tuple[str, np.ndarray]]]]:
    """About `n` chunks grouped by abstract (one item each): every sentence alone, then every two consecutive
    sentences, then every three, until there are `n`."""
    all_docs = docs()
    vec = sentence_vectors(all_docs)
    per_doc: list[list[tuple[str, np.ndarray]]] = [[] for _ in all_docs]
    total = 0
    for width in (1, 2, 3, 4):
        for k, d in enumerate(all_docs):
            for i in range(len(d.sentences) - width + 1):
                if total >= n:
                    break
                v = vec[d.first + i:d.first + i + width].mean(axis=0)
                per_doc[k].append((" ".join(d.sentences[i:i + width]), v / np.linalg.norm(v)))
                total += 1
    return [(d, c) for d, c in zip(all_docs, per_doc, strict=True) if c]


def check_mean(sample: int = 200) -> float:
    """The mean cosine between the model's vector of a two- or three-sentence passage and the normalised mean of
    its sentences' vectors, over `sample` passages."""
    from lev.embedding.embedder import LocalEmbedder

    all_docs = docs()
    vec = sentence_vectors(all_docs)
    rng = np.random.default_rng(3)
    picked: list[tuple[Doc, int]] = []
    for k in rng.choice(len(all_docs), sample * 2, replace=False):
        d = all_docs[int(k)]
        width = 2 + len(picked) % 2
        if len(d.sentences) >= width:
            picked.append((d, width))
        if len(picked) == sample:
            break
    texts = [" ".join(d.sentences[:w]) for d, w in picked]
    truth = np.asarray(LocalEmbedder().embed(texts), dtype=np.float32)
    means = np.stack([vec[d.first:d.first + w].mean(axis=0) for d, w in picked])
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    return float(np.mean(np.sum(truth * means, axis=1)))
