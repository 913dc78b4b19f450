"""`make cluster`: start the topology of cluster/topology.py, print where everything is, run until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import tempfile
import time
from pathlib import Path

from cluster.topology import Cluster


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", help="where the servers keep their data (default: a new temporary directory)")
    args = ap.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="lev-cluster-"))
    cluster = Cluster(base)
    started = time.monotonic()
    print(f"starting the cluster under {base} ...", flush=True)
    stop = False

    def on_signal(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        cluster.start()
        cluster.lev("user", "create", "operator@example.com", "--tier", "pro")
        token = cluster.lev("token", "create", "--user", "operator@example.com", "--name", "cluster", "--write")
        env = cluster.env(1)
        print(f"""
Lev cluster up in {time.monotonic() - started:.0f} s
  balancer     {cluster.url}   (haproxy -> {', '.join(cluster.api_url(i) for i in (1, 2))})
  workers      2 x lev worker (pids {cluster.procs['worker1'].pid}, {cluster.procs['worker2'].pid})
  PostgreSQL   127.0.0.1:{cluster.pg_port} (pgvector)   Redis 127.0.0.1:{cluster.redis_port}   S3 {cluster.s3_url}
  logs         {base}/*.log
  a token      {token}   (user operator@example.com)

  curl -H 'Authorization: Bearer {token}' '{cluster.url}/api/v1/search?q=hello'
  curl {cluster.url}/readyz ; curl {cluster.api_url(1)}/metrics

  CLI against the cluster:
    export LEV_DATABASE_URL='{env['LEV_DATABASE_URL']}' LEV_REDIS_URL='{env['LEV_REDIS_URL']}'
    export LEV_OBJECT_STORE=s3 LEV_S3_BUCKET={cluster.bucket} LEV_S3_ENDPOINT_URL={cluster.s3_url} \\
           LEV_S3_ACCESS_KEY=cluster LEV_S3_SECRET_KEY=cluster-secret
Ctrl-C stops everything.""", flush=True)
        while not stop:
            time.sleep(0.5)
    finally:
        print("stopping ...", flush=True)
        cluster.stop()


if __name__ == "__main__":
    main()
