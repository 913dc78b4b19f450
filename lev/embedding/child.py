"""The ingest embedding process (`python -m lev.embedding.child NICE THREADS [GRAPH]`), started by an API
process; with GRAPH it first writes the ONNX query graph there for its parent (`query_graph.use_query_graph`).

It loads the local model (and writes the graph) at the priority it was started with, since its parent's start-up
waits for it, then lowers the CPU priority of all its threads and embeds one batch of texts at a time: a request is
a 4-byte big-endian length and a JSON list of strings on stdin; the answer is a 4-byte length and either `V` plus
the float32 vectors (row-major, `LOCAL_DIM` per text) or `E` plus an error message. It exits when stdin closes, so
it never outlives the process that started it. Nothing else may reach the protocol's stdout: file descriptor 1 is
pointed at stderr (the server log) before any library loads.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from lev.embedding.embedder import LocalEmbedder
from lev.embedding.pool import READY
from lev.embedding.query_graph import save_query_graph


def _read(stream: object, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = stream.read(n - len(data))  # type: ignore[attr-defined]
        if not part:
            return b""
        data += part
    return data


def lower_priority(nice: int) -> None:
    """Raise the niceness of every thread of this process by `nice`. Linux keeps it per thread (torch's pool is
    running by now), and threads started later take their creator's; elsewhere it is per process."""
    if nice <= 0:
        return
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except FileNotFoundError:
        os.nice(nice)
        return
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
        except ProcessLookupError:  # a thread that ended meanwhile
            continue


def main(argv: list[str]) -> None:
    nice, threads, graph = int(argv[0]), int(argv[1]), argv[2] if len(argv) > 2 else ""
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # library chatter on stdout lands in the log, not in the protocol
    import numpy as np
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    embedder = LocalEmbedder()  # its batches are computed here: this process never sends them on
    embedder.embed(["warm up"])
    if graph:  # the query graph for the API process, which then needs neither transformers nor the eager model
        save_query_graph(Path(graph))
    lower_priority(nice)
    proto.write(READY)
    proto.flush()
    stdin = sys.stdin.buffer
    while True:
        header = _read(stdin, 4)
        if not header:
            return
        texts = json.loads(_read(stdin, int.from_bytes(header, "big")))
        try:
            reply = b"V" + np.asarray(embedder.embed(texts), dtype=np.float32).tobytes()
        except Exception as exc:  # answered, not fatal: the caller raises it
            reply = b"E" + f"{type(exc).__name__}: {exc}".encode()
        proto.write(len(reply).to_bytes(4, "big") + reply)
        proto.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
