"""The benchmark harness end to end on a tiny synthetic set (bench/smoke.py): ingest, REST search, trec metrics.

Runs in a subprocess: the harness starts its own Lev and owns the process-wide database engine, which must not
replace the test session's.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.stack import ROOT

SCRIPT = ("import json; from bench.smoke import main; r = main(); print(r); "
          "print('METRICS ' + json.dumps(r.metrics))")


def test_bench_smoke() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "| hybrid |" in proc.stdout
    line = next(x for x in proc.stdout.splitlines() if x.startswith("METRICS "))
    scores = json.loads(line.removeprefix("METRICS "))
    assert set(scores) == {"hybrid", "semantic", "keyword"}
    for mode, m in scores.items():
        assert m["ndcg_cut.10"] > 0.5, (mode, m)
        assert m["recall.50"] >= 0.8, (mode, m)
    assert scores["hybrid"]["ndcg_cut.10"] > 0.8, scores
