"""How long a second `lev serve` on an existing data directory takes to be ready, and how long Ctrl-C takes to
stop it (issue 51). Runs the real command N times on one data directory (the first run creates it and is not
counted), reading readiness from /readyz; reports wall seconds, the process's CPU seconds at ready (independent of
what else loads the machine) and the load average, and each step's seconds from the banner.

    .venv/bin/python -m bench.restart [--runs 3] [--source DIR]   (DIR: another checkout's code, for a before/after)
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one(data_dir: Path, source: Path) -> dict[str, object]:
    port = _port()
    env = {**os.environ, "LEV_DATA_DIR": str(data_dir), "LEV_LOG_FORMAT": "console", "PYTHONPATH": str(source)}
    entry = "lev.launch" if (source / "lev" / "launch.py").exists() else "lev.cli"
    code = f"import sys; sys.argv = ['lev', 'serve', '--port', sys.argv[1]]; from {entry} import main; main()"
    load = os.getloadavg()[0]
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", code, str(port)], env=env, cwd=source, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() - began > 600:
            raise RuntimeError(proc.stderr.read() if proc.stderr else "lev serve ended")
        time.sleep(0.05)
    ready = time.monotonic() - began
    times = psutil.Process(proc.pid).cpu_times()
    cpu = times.user + times.system
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    stop_began = time.monotonic()
    _, err = proc.communicate(timeout=60)
    stopped = time.monotonic() - stop_began
    started = re.search(r"started in [^\n]*", err)
    return {"ready_s": round(ready, 2), "cpu_s": round(cpu, 2), "stop_s": round(stopped, 2), "load": round(load, 1),
            "traceback": "Traceback" in err, "steps": started.group(0) if started else ""}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--source", type=Path, default=ROOT)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lev-restart-") as tmp:
        data = Path(tmp) / "data"
        print("first run (creates the data directory):", one(data, args.source.resolve()), flush=True)
        for _ in range(args.runs):
            print("restart:", one(data, args.source.resolve()), flush=True)


if __name__ == "__main__":
    main()
