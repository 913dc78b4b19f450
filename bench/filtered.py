"""Issue 49: filtered searches walk the index (pgvector 0.8's iterative scans) and keep their recall and speed,
the old engine (the commit before the engine: pgserver 0.1.4, PostgreSQL 16.2, pgvector 0.6.2) beside the new one
in one run.

The library is generated (bench/gencorpus.py): CHUNKS distinct chunks of SciFact's abstracts (1 to 3 consecutive
sentences, real MiniLM vectors), two or three chunks an item (about 40,000 items, one user), three folders holding
about 0.5 %, 5 % and 50 % of the chunks (items drawn at random). Each engine runs in its own checkout, interpreter
and data directory (bench/filtered_worker.py, the same rows COPY'd into each). Each SciFact test claim is searched
unfiltered and in each folder, semantic and hybrid, limit 10, the scopes in a balanced order (each after every
other equally often) and the engines alternated, so old and new are timed in the same moments; once all are timed,
each engine's exact answer (every scope scanned exactly) is fetched for recall@10.

    python -m bench.filtered             # builds the corpus and both databases once (under /tmp), then measures
    LEV_BENCH_FILTERED_CHUNKS=20000      # a smaller library
    LEV_BENCH_FILTERED_OLD=none          # the new engine alone

The goal (issue 49): recall@10 >= 0.98 in each folder, p95 <= 1.2x the unfiltered search's, every answer full.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import ROOT, SCIFACT, commit, machine, old_tree_at, own_python, pct
from bench.scifact import load_data

CHUNKS = int(os.environ.get("LEV_BENCH_FILTERED_CHUNKS", 100_000))
DATA = Path(os.environ.get("LEV_BENCH_FILTERED_DIR", f"/tmp/lev-bench-filtered-gen-{CHUNKS}"))
OLD = os.environ.get("LEV_BENCH_FILTERED_OLD", "82e773a")  # the last commit on the old engine
SHARES = (0.005, 0.05, 0.5)
CLAIMS = int(os.environ.get("LEV_BENCH_FILTERED_CLAIMS", 200))
MODES = ("semantic", "hybrid")
WARM = 20


def corpus() -> Path:
    """The generated library as files both engines load: corpus.json (ids, texts, items, folders, claims),
    vectors.npy (the chunks'), queries.npy (the claims')."""
    from bench.gencorpus import chunks

    out = DATA / "corpus"
    if (out / "queries.npy").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(49)

    def new_id() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    texts: list[str] = []
    vectors: list[np.ndarray] = []
    items: list[tuple[str, str, str, int, int]] = []  # item id, content id, title, first chunk, chunks
    for doc, pieces in chunks(CHUNKS):
        k = 0
        while k < len(pieces):
            n = rng.choice((2, 3))
            items.append((new_id(), new_id(), doc.title, len(texts), len(pieces[k:k + n])))
            for text, vector in pieces[k:k + n]:
                texts.append(text)
                vectors.append(vector)
            k += n
    folders = {}
    for share in SHARES:
        picked, have = [], 0
        for item in rng.sample(items, len(items)):
            if have >= share * len(texts):
                break
            picked.append(item[0])
            have += item[4]
        folders[f"{share:g}"] = {"id": new_id(), "items": picked, "chunks": have}
    _, queries, qrels = load_data(SCIFACT)
    claims = [queries[q] for q in sorted(qrels["test"])]  # all of them: CLAIMS cuts the measurement, not the corpus
    from lev.embedding.embedder import LocalEmbedder

    np.save(out / "vectors.npy", np.stack(vectors).astype(np.float32))
    (out / "corpus.json").write_text(json.dumps({
        "user_id": new_id(), "items": items, "texts": texts, "chunk_ids": [new_id() for _ in texts],
        "folders": folders, "claims": claims}))
    np.save(out / "queries.npy", np.asarray(LocalEmbedder().embed_queries(claims), dtype=np.float32))
    return out


class Side:
    """One engine: its checkout's worker process, asked one command at a time."""

    def __init__(self, name: str, root: Path, data: Path, corpus_dir: Path) -> None:
        self.name = name
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "LEV_DATA_DIR")}
        env["PYTHONPATH"] = str(root)
        self.proc = subprocess.Popen([own_python(root), str(ROOT / "bench" / "filtered_worker.py"), str(data),
                                      str(corpus_dir)], cwd=root, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        ready = json.loads(self.proc.stdout.readline())
        assert ready == {"ready": True}, ready

    def ask(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def semantic_truth(corpus_dir: Path, meta: dict[str, Any]) -> dict[str, list[list[str]]]:
    """The exact nearest 10 chunks of every claim in every scope, by cosine over the chunks' own float32 vectors
    (the values stored): an exact scan of the scope done outside the engines, the same truth for both."""
    vectors = np.load(corpus_dir / "vectors.npy")
    queries = np.load(corpus_dir / "queries.npy")
    ids = np.asarray(meta["chunk_ids"])
    first = {item_id: (first, n) for item_id, _, _, first, n in meta["items"]}
    masks = {"none": np.ones(len(ids), dtype=bool)}
    for share, folder in meta["folders"].items():
        mask = np.zeros(len(ids), dtype=bool)
        for item_id in folder["items"]:
            f, n = first[item_id]
            mask[f:f + n] = True
        masks[share] = mask
    out: dict[str, list[list[str]]] = {}
    for k, mask in masks.items():
        sims = queries @ vectors[mask].T
        top = np.argsort(-sims, axis=1)[:, :10]
        out[k] = [list(ids[mask][row]) for row in top]
    return out


def balanced_order(n: int, i: int) -> list[int]:
    """Round `i` of a Williams design over `n` scopes: across n rounds (2n when n is odd) every scope comes at
    every place and right after every other scope equally often, so no scope is always searched just after the
    same one (a rotation put the unfiltered search after the 50 % folder's walk of the same claim three rounds in
    four)."""
    row = [0] + [(1 + j // 2) if j % 2 == 0 else (n - 1 - j // 2) for j in range(n - 1)]
    order = [(x + i) % n for x in row]
    return order[::-1] if n % 2 and (i // n) % 2 else order


def measure(sides: list[Side], scopes: list[str], claims: int, truths: dict[str, list[list[str]]]
            ) -> dict[str, Any]:
    """Every claim searched in every scope by both engines, timed, in a balanced order; then, untimed (an exact
    scan read just before a timed search would have cooled its caches), the recall: semantic against `truths`,
    hybrid against each engine's own exact search (unfiltered on every fifth claim only: an exact hybrid search
    of the whole library takes seconds here)."""
    out: dict[str, Any] = {"claims": claims}
    for mode in MODES:
        ms: dict[str, dict[str, list[float]]] = {s.name: {k: [] for k in scopes} for s in sides}
        found: dict[tuple[str, str, int], list[str]] = {}
        short = {s.name: dict.fromkeys(scopes, 0) for s in sides}
        loads = [load()]
        for i in range(min(WARM, claims)):  # plans prepared, pages cached
            for k in scopes:
                for s in sides:
                    s.ask(op="search", mode=mode, scope=k, i=i, exact=False)
        for i in range(claims):
            for k in (scopes[j] for j in balanced_order(len(scopes), i)):
                for s in (sides if i % 2 == 0 else sides[::-1]):
                    r = s.ask(op="search", mode=mode, scope=k, i=i, exact=False)
                    ms[s.name][k].append(r["ms"])
                    short[s.name][k] += len(r["ids"]) < len(truths[k][i])  # min(10, the scope's chunks)
                    found[s.name, k, i] = r["ids"]
            if i % 50 == 49:
                loads.append(load())
                print(f"{mode}: {i + 1} claims, load {loads[-1]}", file=sys.stderr)
        recall, agree = _recall(sides, scopes, claims, mode, truths, found)
        out[mode] = {"load": loads, "agree": {k: float(np.mean(v)) if v else None for k, v in agree.items()},
                     **{s.name: {k: {**pct(ms[s.name][k]), "recall": float(np.mean(recall[s.name][k])),
                                     "short": short[s.name][k]} for k in scopes} for s in sides}}
    return out


def _recall(sides: list[Side], scopes: list[str], claims: int, mode: str, truths: dict[str, list[list[str]]],
            found: dict[tuple[str, str, int], list[str]]) -> tuple[dict[str, dict[str, list[float]]],
                                                                    dict[str, list[float]]]:
    """Each timed answer's share of the exact one, and (hybrid) how alike the two engines' exact answers are."""
    recall: dict[str, dict[str, list[float]]] = {s.name: {k: [] for k in scopes} for s in sides}
    agree: dict[str, list[float]] = {k: [] for k in scopes}  # old and new exact answers alike
    for i in range(claims):
        for k in scopes:
            if mode != "semantic" and k == "none" and i % 5:
                continue
            exact: dict[str, list[str]] = {}
            for s in sides:
                exact[s.name] = truths[k][i] if mode == "semantic" else \
                    s.ask(op="search", mode=mode, scope=k, i=i, exact=True)["ids"]
                truth = exact[s.name]
                recall[s.name][k].append(len(set(found[s.name, k, i]) & set(truth)) / max(len(truth), 1))
            if len(sides) == 2 and mode != "semantic":
                a, b = (set(v) for v in exact.values())
                agree[k].append(len(a & b) / max(len(a), 1))
    return recall, agree


def table(meta: dict[str, Any], engines: dict[str, str], result: dict[str, Any]) -> str:
    names = list(engines)
    head = "| mode | scope | chunks | " + " | ".join(
        f"{n} p50 | {n} p95 | {n} x | {n} recall@10 | {n} short" for n in names) + " |"
    lines = [", ".join(f"{n}: {e}" for n, e in engines.items()) + f"; {len(meta['texts']):,} chunks in "
             f"{len(meta['items']):,} items; {result['claims']} SciFact test claims, limit 10, in process. "
             "p50 / p95 ms; x = p95 over the same engine's unfiltered p95; recall@10 against an exact scan of "
             "the same scope (semantic: cosine over the stored float32 vectors, computed outside the engines; "
             "hybrid: the same engine's search with its vector side scanned exactly, unfiltered on every fifth "
             "claim); short = answers with fewer than 10 hits.", "", head,
             "| " + " | ".join(["---"] * (3 + 5 * len(names))) + " |"]
    for mode in MODES:
        rows = result[mode]
        for k in ["none", *meta["folders"]]:
            n = len(meta["texts"]) if k == "none" else meta["folders"][k]["chunks"]
            scope = "unfiltered" if k == "none" else f"folder, {float(k) * 100:g} %"
            cells = []
            for name in names:
                r, base = rows[name][k], rows[name]["none"]["p95"]
                cells.append(f"{r['p50']:.1f} | {r['p95']:.1f} | {r['p95'] / base:.2f} | {r['recall']:.3f} | "
                             f"{r['short']}")
            lines.append(f"| {mode} | {scope} | {n:,} | " + " | ".join(cells) + " |")
    lines.append("")
    for mode in MODES:
        agree = ", ".join(f"{k}: {v:.3f}" for k, v in result[mode]["agree"].items() if v is not None)
        lines.append(f"- {mode}: load average (1, 5, 15 min) while measured: {' -> '.join(result[mode]['load'])}"
                     + (f"; the engines' exact answers alike (share of ids): {agree}" if agree else ""))
    return "\n".join(lines)


def main() -> str:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    t = time.perf_counter()
    corpus_dir = corpus()
    meta = json.loads((corpus_dir / "corpus.json").read_text())
    print(f"corpus ready in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    roots = {"new": ROOT}
    if OLD != "none":
        roots = {"old": old_tree_at(OLD), **roots}
    sides = []
    for name, root in roots.items():
        t = time.perf_counter()
        sides.append(Side(name, root, DATA / name, corpus_dir))
        print(f"{name} ready in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    try:
        engines = {s.name: s.ask(op="engine")["engine"] for s in sides}
        truths = semantic_truth(corpus_dir, meta)
        result = measure(sides, ["none", *meta["folders"]], min(CLAIMS, len(meta["claims"])), truths)
    finally:
        for s in sides:
            s.close()
    (DATA / "result.json").write_text(json.dumps(result))
    report = (f"{machine()}; commit {commit()}" + (f" against {OLD}" if OLD != "none" else "") + "\n\n"
              + table(meta, engines, result))
    print(report)
    return report


if __name__ == "__main__":
    main()
