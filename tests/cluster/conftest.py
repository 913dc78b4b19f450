"""One cluster (cluster/topology.py) for the cluster and fault tests: real PostgreSQL over TCP, Redis, S3,
haproxy, 2 API processes and 2 workers; the transcription provider is the session's stand-in."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from cluster.topology import Cluster
from tests.transcribe_stub import TranscribeStub


@pytest.fixture(scope="session")
def cluster(transcribe_stub: TranscribeStub) -> Iterator[Cluster]:
    base = Path(tempfile.mkdtemp(prefix="levc-", dir="/tmp"))
    # Test timings (documented settings): a worker is declared dead after 5 missed beats of 0.5 s, a failed job
    # is tried again after 1 s times its try number, a job is abandoned on its third pick-up. One user's three jobs
    # may run at once (the crash tests kill a worker holding all three; fairness is tests/ingest/test_fair_share.py).
    c = Cluster(base, extra_env={
        "LEV_JOBS_PER_USER": "4",
        "LEV_ALLOW_PRIVATE_URLS": "true", "LEV_TRANSCRIBE_URL": transcribe_stub.url, "LEV_JOB_MAX_TRIES": "2",
        "LEV_WORKER_HEARTBEAT_SEC": "0.5", "LEV_JOB_RETRY_DELAY_SEC": "1", "LEV_SHUTDOWN_GRACE_SEC": "10",
        "LEV_LOG_LEVEL": "info",
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
        # Tokens are minted in this process with Lev's own minting code on an engine of its own (the session's
        # store engine belongs to the single-process tests): a `lev` CLI run costs seconds of start-up each.
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.engine = asyncio.run_coroutine_threadsafe(self._engine(), self.loop).result(60)

    async def _engine(self) -> AsyncEngine:
        return create_async_engine(self.c.database_url, pool_size=1, pool_pre_ping=True)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.engine.dispose(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)

    def db(self) -> psycopg.Connection[Any]:
        return psycopg.connect(host="127.0.0.1", port=self.c.pg_port, user="lev", password=self.c.pg_password,
                               dbname="lev", autocommit=True)

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.db() as conn:
            return conn.execute(statement, params).fetchall()  # type: ignore[arg-type]

    def token_by_cli(self) -> str:
        """A token minted the operator's way: `lev user create` and `lev token create` against the cluster."""
        email = f"c{uuid.uuid4().hex[:10]}@example.com"
        self.c.lev("user", "create", email, "--tier", "pro")
        return self.c.lev("token", "create", "--user", email, "--name", "cluster-test", "--write")

    def token(self, *, write: bool = True, write_cap: int = 0) -> str:
        """A new pro user's token (what `lev user create` and `lev token create` do)."""
        from lev.auth.policy import mint
        from lev.limits.tiers import Tiers
        from lev.store import users

        async def go() -> str:
            async with AsyncSession(self.engine) as s, s.begin():
                email = f"c{uuid.uuid4().hex[:10]}@example.com"
                await users.create_user(s, email, "pro", verified=True)
                user = await users.by_email(s, email)
                assert user is not None
                secret, _ = await mint(s, user, "cluster-test", write=write, folder_ids=[], kb_only=True,
                                       expires_in_days=30, write_cap=write_cap, tiers=Tiers({"pro": -1}, {}))
                return secret

        return asyncio.run_coroutine_threadsafe(go(), self.loop).result(60)

    def client(self, token: str, base: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=base or self.c.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def running(self) -> dict[str, tuple[str, int]]:
        """The jobs running now: job id -> (function, worker pid), from the workers' claims."""
        from arq.jobs import deserialize_job_raw

        out = {}
        for key in self.redis.scan_iter("lev:claim:*"):
            job_id = key.decode()[len("lev:claim:"):]
            raw, owner = self.redis.get(f"arq:job:{job_id}"), self.redis.get(key)
            if raw is not None and owner is not None:
                out[job_id] = (deserialize_job_raw(raw)[0], int(owner.decode().split(":")[1]))
        return out

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
        """Restart any worker a test killed (not yet restarted) and wait until every worker beats."""
        for i in range(1, self.c.workers + 1):
            if not self.c.procs[f"worker{i}"].alive():
                self.c.start_worker(i)
        for i in range(1, self.c.workers + 1):
            self.c.wait_worker(i)

    def kill_and_replace(self, name: str) -> None:
        """kill -9 a Lev process and start its replacement at once, as a supervisor would; the replacement boots
        while the test goes on (`ensure_workers` / `Cluster.wait_api` wait for it)."""
        self.c.procs[name].kill9()
        kind, i = name.rstrip("0123456789"), int(name[-1])
        (self.c.start_api if kind == "api" else self.c.start_worker)(i)

    def run_cron_now(self, function: str) -> None:
        """Queue one run of a cron job now (the workers run it as they would at its minute), instead of waiting
        for its schedule."""
        import asyncio

        from arq import create_pool
        from arq.connections import RedisSettings

        from lev.runtime import QUEUE

        async def go() -> None:
            pool = await create_pool(RedisSettings.from_dsn(self.c.redis_url), default_queue_name=QUEUE)
            try:
                await pool.enqueue_job(function)
            finally:
                await pool.aclose()

        asyncio.run(go())

    def activity_total(self, client: httpx.Client, sent: list[str], timeout: float = 15) -> int:
        """The token's activity total once it counts every request in `sent` (the log is written in batches);
        polls without waiting longer than needed."""
        deadline = time.monotonic() + timeout
        while True:
            before = len(sent)
            total = int(client.get("/api/v1/activity", params={"per_page": 1}).json()["total"])
            if total >= before or time.monotonic() > deadline:
                return total
            time.sleep(0.2)


@pytest.fixture(scope="session")
def ops(cluster: Cluster) -> Iterator[Ops]:
    o = Ops(cluster)
    yield o
    o.close()
