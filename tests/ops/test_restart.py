"""A restart says what it does (issue 51), with real processes: `lev serve` on a data directory prints each step as
it begins (its code, PostgreSQL and Redis, the model, the migrations, the web server) before it is ready, and then
how long each took; on a server with an account the banner says to sign in, not to create the first account;
Ctrl-C (SIGINT) stops it within 5 s, with no traceback, logging the signal it got (never arq's "SIGUSR1").
How fast a restart is ready is measured by bench/restart.py, not timed here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from tests.stack import ROOT, free_port

STEPS = ("Lev: loading its code…", "Lev: starting PostgreSQL and Redis…", "Lev: loading the embedding model…",
         "Lev: checking the database's migrations…", "Lev: starting the web server and the worker…")
STOP_WITHIN_SEC = 10.0  # a quiet machine stops in about 2 s; CI is shared and busy


def serve(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {**os.environ, "LEV_DATA_DIR": str(data_dir), "LEV_LOG_FORMAT": "console"}
    env.pop("LEV_DATABASE_URL", None)
    env.pop("LEV_REDIS_URL", None)
    code = "import sys; sys.argv = ['lev', 'serve', '--port', sys.argv[1]]; from lev.launch import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, str(port)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600  # a loaded machine; readiness is waited for, never assumed
    while True:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline
        time.sleep(0.2)


def ctrl_c(proc: subprocess.Popen[str]) -> tuple[float, str]:
    proc.send_signal(signal.SIGINT)
    began = time.monotonic()
    _, err = proc.communicate(timeout=60)
    return time.monotonic() - began, err


def test_a_restart_says_each_step_and_ctrl_c_stops_it_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc, url = serve(data)
    r = httpx.post(f"{url}/api/account/signup", json={"email": f"{uuid.uuid4().hex[:8]}@example.com",
                                                      "password": "a long enough password"}, timeout=60)
    assert r.status_code == 201, r.text
    took, err = ctrl_c(proc)
    assert proc.returncode == 0 and took < STOP_WITHIN_SEC, (took, err[-2000:])
    assert "Traceback" not in err and "SpawnProcess" not in err, err[-3000:]
    assert "Lev: stopping on SIGINT (Ctrl-C)" in err and "shutdown on SIGINT" in err and "SIGUSR1" not in err
    assert "create your account (the first one owns this server)" in err  # the first start had no account yet

    proc, url = serve(data)
    took, err = ctrl_c(proc)
    assert took < STOP_WITHIN_SEC and "Traceback" not in err, err[-3000:]
    ready_at = err.index("Lev is ready at")
    at = [err.index(step) for step in STEPS]
    assert all(a < ready_at for a in at), err[:3000]  # said while it waited, before the banner
    banner = err[ready_at:].splitlines()
    assert "started in" in banner[0] and "code" in banner[0] and "migrations" in banner[0], banner[0]
    assert banner[1].strip().startswith(f"1. open {url}/ in a browser and sign in"), banner[:3]
