"""One cluster (cluster/topology.py) for the cluster and fault tests: real PostgreSQL over TCP, Redis, S3,
haproxy, 2 API processes and 2 workers; the transcription provider is the session's stand-in."""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from cluster.topology import Cluster
from tests.transcribe_stub import TranscribeStub


@pytest.fixture(scope="session")
def cluster(transcribe_stub: TranscribeStub) -> Iterator[Cluster]:
    base = Path(tempfile.mkdtemp(prefix="levc-", dir="/tmp"))
    c = Cluster(base, extra_env={
        "LEV_ALLOW_PRIVATE_URLS": "true", "LEV_TRANSCRIBE_URL": transcribe_stub.url, "LEV_JOB_MAX_TRIES": "2",
        "LEV_WORKER_HEARTBEAT_SEC": "1", "LEV_SHUTDOWN_GRACE_SEC": "10", "LEV_LOG_LEVEL": "info",
    })
    try:
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(base, ignore_errors=True)


class Ops:
    """What the tests do to and read from the cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self.redis = redis.Redis(port=cluster.redis_port)

    def db(self) -> psycopg.Connection[Any]:
        return psycopg.connect(host="127.0.0.1", port=self.c.pg_port, user="lev", password=self.c.pg_password,
                               dbname="lev", autocommit=True)

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.db() as conn:
            return conn.execute(statement, params).fetchall()  # type: ignore[arg-type]

    def token(self, *, write: bool = True, write_cap: int = 0) -> str:
        email = f"c{uuid.uuid4().hex[:10]}@example.com"
        self.c.lev("user", "create", email, "--tier", "pro")
        args = ["token", "create", "--user", email, "--name", "cluster-test", "--write-cap", str(write_cap)]
        return self.c.lev(*args, *(["--write"] if write else []))

    def client(self, token: str, base: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=base or self.c.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def job_owner(self, function: str, timeout: float = 60) -> tuple[str, int]:
        """(job id, worker pid) of a running job of `function`, from the workers' claims."""
        from arq.jobs import deserialize_job_raw

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for key in self.redis.scan_iter("lev:claim:*"):
                job_id = key.decode()[len("lev:claim:"):]
                raw = self.redis.get(f"arq:job:{job_id}")
                owner = self.redis.get(key)
                if raw is None or owner is None:
                    continue
                if deserialize_job_raw(raw)[0] == function:
                    return job_id, int(owner.decode().split(":")[1])
            time.sleep(0.1)
        raise AssertionError(f"no running {function} job within {timeout} s")

    def metric(self, node: int, name: str, **labels: str) -> float:
        text = httpx.get(f"{self.c.api_url(node)}/metrics", timeout=10).text
        total = 0.0
        for line in text.splitlines():
            named = line.startswith(name + "{") or line.startswith(name + " ")
            if named and all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def wait_item(self, client: httpx.Client, item_id: str, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            item: dict[str, Any] = client.get(f"/api/v1/items/{item_id}").json()
            if item.get("status") != "processing" and item.get("transcription_status") != "pending":
                return item
            time.sleep(0.3)
        raise AssertionError(f"item {item_id} still processing after {timeout} s")

    def ensure_workers(self) -> None:
        """Restart any worker a test killed and wait until every worker beats."""
        for i in range(1, self.c.workers + 1):
            if not self.c.procs[f"worker{i}"].alive():
                self.c.start_worker(i)
        for i in range(1, self.c.workers + 1):
            self.c.wait_worker(i)


@pytest.fixture(scope="session")
def ops(cluster: Cluster) -> Ops:
    return Ops(cluster)
