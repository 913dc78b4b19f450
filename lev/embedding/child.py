"""The ingest embedding process (`python -m lev.embedding.child NICE THREADS`), started by an API process's
`IngestPool`.

It loads the local model (`minilm.MiniLM`) at the priority it was started with, since its parent's start-up waits
for it, then lowers the CPU priority of all its threads and embeds one batch of texts at a time: a request is a
4-byte big-endian length and a JSON list of strings on stdin; the answer is a 4-byte length and either `V` plus the
float32 vectors (row-major, `LOCAL_DIM` per text) or `E` plus an error message. It exits when stdin closes, so it
never outlives the process that started it. Nothing else may reach the protocol's stdout: file descriptor 1 is
pointed at stderr (the server log) before any library loads.
"""

from __future__ import annotations

import json
import os
import sys
from typing import BinaryIO

from lev.embedding.minilm import MiniLM, return_freed_memory
from lev.embedding.pool import READY


def _read(stream: BinaryIO, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = stream.read(n - len(data))
        if not part:
            return b""
        data += part
    return data


def lower_priority(nice: int) -> None:
    """Raise the niceness of every thread of this process by `nice`. Linux keeps it per thread (ONNX Runtime's
    pool is running by now), and threads started later take their creator's; elsewhere it is per process."""
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
    nice, threads = int(argv[0]), int(argv[1])
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # library chatter on stdout lands in the log, not in the protocol
    return_freed_memory()
    model = MiniLM(threads, arena=False)
    model.embed(["warm up"])
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
            reply = b"V" + model.embed(texts).tobytes()
        except Exception as exc:  # answered, not fatal: the caller raises it
            reply = b"E" + f"{type(exc).__name__}: {exc}".encode()
        proto.write(len(reply).to_bytes(4, "big") + reply)
        proto.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
