"""Test harness: a live Lev server (a real `lev serve` subprocess) on the embedded stack, and an admin
handle that uses the same store code as the CLI to create users, folders and tokens."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """`lev serve` in a subprocess with the given environment; stopped with SIGINT (clean shutdown).

    One `lev serve` serves a data directory's embedded servers (a second refuses to start): a server started while
    another one serves `data_dir` is pointed at those servers by URL (LEV_DATABASE_URL, LEV_REDIS_URL) instead."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, log_name: str = "server",
                 root: Path = ROOT, args: list[str] | None = None, python: str = sys.executable) -> None:
        from lev.embedded import data_dir_server, running_postgres_url, running_redis_url

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.root = root  # another checkout's code (the benchmarks' old commit) runs with its own sources first
        self.python = python  # and, when its dependencies differ, with its own virtualenv's interpreter
        self.env = {**os.environ, "LEV_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1",
                    "LEV_BASE_URL": self.url, **(env or {})}
        if data_dir_server(data_dir) is not None:
            for name, url in (("LEV_DATABASE_URL", running_postgres_url(data_dir)),
                              ("LEV_REDIS_URL", running_redis_url(data_dir))):
                if url and not self.env.get(name):
                    self.env[name] = url
        if root != ROOT:
            self.env["PYTHONPATH"] = str(root)
        self.log_path = data_dir / f"{log_name}-{self.port}.log"
        self.args = list(args or [])  # more `lev serve` options (`--no-workers-inline`)
        self.command = [self.python, "-m", "lev.cli", "serve"]  # what runs it (a benchmark may wrap `lev serve`)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 300) -> LiveServer:
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [*self.command, "--port", str(self.port), *self.args],
            env=self.env, cwd=self.root, stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_path.read_text()[-4000:]}")
            try:
                if httpx.get(f"{self.url}/api/v1/openapi.json", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        # Never leave it running: a late server would join this data dir's job queue with its own settings and
        # take other tests' jobs.
        self.proc.kill()
        self.proc.wait()
        raise RuntimeError(f"server did not start:\n{self.log_path.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Admin:
    """Runs store coroutines on a private event loop with its own engine (what the CLI does).

    A raw SQL write (`sql`) bypasses the product paths that announce auth changes, so it announces one itself
    (a new auth epoch in Redis, as `lev token revoke` does): a token revoked or expired by hand stops at once."""

    def __init__(self, database_url: str, redis_url: str | None = None) -> None:
        from lev.store import db

        self.redis_url = redis_url
        self.database_url = database_url
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run_coro(self._init(db, database_url))

    async def _init(self, db: Any, url: str) -> None:
        db.init_engine(url, pool_size=2)

    def run_coro(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(120)

    def run(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        from lev.store.db import database

        async def go() -> T:
            async with database().transaction() as s:
                return await fn(s)

        return self.run_coro(go())

    def sql(self, statement: str, **params: Any) -> list[Any]:
        from sqlalchemy import text

        async def go(s: Any) -> list[Any]:
            res = await s.execute(text(statement), params)
            return list(res.fetchall()) if res.returns_rows else []

        rows = self.run(go)
        if self.redis_url and not statement.lstrip().upper().startswith("SELECT"):
            from lev.auth.principal_cache import announce_change

            self.run_coro(announce_change(self.redis_url))
        return rows

    def job_ctx(self) -> dict[str, Any]:
        """The ctx a job gets from the worker (`tasks.worker.open_clients`), for running a job in this process."""
        from lev.core.settings import get_settings
        from lev.embedding.embedder import build_embedder
        from lev.embedding.pool import QueryBatcher
        from lev.plumbing.deps import Deps
        from lev.providers.transcriber import transcriber_from
        from lev.runtime import get_object_store
        from lev.store import db

        if getattr(self, "_pools", None) is None:
            from arq import create_pool
            from arq.connections import RedisSettings
            from redis.asyncio import Redis

            from lev.runtime import QUEUE

            assert self.redis_url is not None
            url = self.redis_url

            async def pools() -> tuple[Any, Any]:
                return await create_pool(RedisSettings.from_dsn(url), default_queue_name=QUEUE), Redis.from_url(url)

            self._pools = self.run_coro(pools())
            self._embedder = build_embedder(get_settings())  # batches computed in this process
        queue, redis = self._pools
        settings = get_settings()
        emb = self._embedder
        return {"deps": Deps(settings=settings, db=db.database(), queue=queue, redis=redis, objects=get_object_store(),
                             embedder=emb, queries=QueryBatcher(emb.embed_queries),
                             transcriber=transcriber_from(settings))}

    def close(self) -> None:
        from lev.store import db

        self.run_coro(db.dispose_engine())
        self.loop.call_soon_threadsafe(self.loop.stop)


@dataclass
class User:
    id: uuid.UUID
    email: str
    admin: Admin
    tier: str = "pro"
    folders: dict[str, str] = field(default_factory=dict)

    def folder(self, name: str) -> str:
        from lev.library.reads import create_folder

        fid = self.admin.run(lambda s: create_folder(s, self.id, name))["id"]
        self.folders[name] = fid
        return fid

    def token(self, *, write: bool = False, folders: list[str] | None = None, kb_only: bool = True,
              expires_in_days: int = 365, write_cap: int = 0, name: str = "test") -> str:
        from lev.auth.policy import mint
        from lev.limits.tiers import Tiers
        from lev.store import users

        async def go(s: Any) -> str:
            user = await users.by_email(s, self.email)
            tok, _ = await mint(
                s, user, name, write=write, folder_ids=[uuid.UUID(f) for f in folders or []], kb_only=kb_only,
                expires_in_days=expires_in_days, write_cap=write_cap, tiers=Tiers({"free": 0, "pro": -1}, {}),
            )
            return tok

        return self.admin.run(go)


def new_user(admin: Admin, tier: str = "pro") -> User:
    from lev.store import users

    email = f"u{uuid.uuid4().hex[:10]}@example.com"
    uid = admin.run(lambda s: users.create_user(s, email, tier, verified=True))  # as `lev user create` does
    return User(uid, email, admin, tier)


def mint_token(database_url: str, email: str, *, name: str = "test", write: bool = False, write_cap: int = 0,
               tier: str = "pro", folder_ids: list[str] | None = None) -> str:
    """A token for `email` (a new `tier` user when there is none), minted by Lev's own code on a short-lived engine
    of its own: what `lev user create` and `lev token create --write-cap N` do, without a CLI start-up."""
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
    from sqlalchemy.pool import NullPool

    from lev.auth.policy import mint
    from lev.limits.tiers import Tiers
    from lev.store import users

    async def go() -> str:
        engine = create_async_engine(database_url, poolclass=NullPool)
        try:
            async with AsyncSession(engine) as s, s.begin():
                user = await users.by_email(s, email)
                if user is None:
                    await users.create_user(s, email, tier, verified=True)
                    user = await users.by_email(s, email)
                assert user is not None
                folders = [uuid.UUID(f) for f in folder_ids or []]
                every = Tiers({"free": -1, "pro": -1}, {})
                secret, _ = await mint(s, user, name, write=write, folder_ids=folders, kb_only=True,
                                       expires_in_days=30, write_cap=write_cap, tiers=every)
                return secret
        finally:
            await engine.dispose()

    return asyncio.run(go())


class Api:
    """A small authenticated client for the live server."""

    def __init__(self, base: str, token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=base, headers=headers, timeout=120)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def make_item(user: User, *, folders: list[str] | None = None, in_kb: bool = True, title: str = "An item",
              archived: bool = False, content_id: str | None = None, url: str | None = None) -> str:
    """Insert a user item directly (for REST tests that do not exercise ingest)."""
    item_id = str(uuid.uuid4())
    if content_id is None:
        content_id = str(uuid.uuid4())
        user.admin.sql("INSERT INTO contents (id, kind, title, text, url) VALUES (:id, 'text', :t, :x, :u)",
                       id=content_id, t=title, x=f"text of {title}", u=url)
    user.admin.sql(
        "INSERT INTO user_items (id, user_id, content_id, kind, title, url, in_kb, archived) "
        "VALUES (:id, :u, :c, 'text', :t, :url, :k, :a)",
        id=item_id, u=user.id, c=content_id, t=title, url=url, k=in_kb, a=archived,
    )
    for f in folders or []:
        user.admin.sql("INSERT INTO item_folders (item_id, folder_id) VALUES (:i, :f)", i=item_id, f=f)
    return item_id
