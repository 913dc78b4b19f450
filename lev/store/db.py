"""Engine, sessions and migrations for the one PostgreSQL database."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import event, text
from sqlalchemy.exc import DisconnectionError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

_engine: AsyncEngine | None = None
_url: str | None = None
CONNECT_TIMEOUT_SEC = 5


AFTER_COMMIT = "lev_after_commit"


def after_commit(session: AsyncSession, hook: Callable[[], Awaitable[None]]) -> None:
    """Run `hook` once the session's transaction (`Database.transaction`) has committed; never after a rollback. A hook
    is a nudge (queue the job that handles what was committed), never the record: a process that dies between
    the commit and the hook loses only the nudge."""
    session.info.setdefault(AFTER_COMMIT, []).append(hook)


class Database:
    """The sessions of one engine, handed to whoever needs them (a request's handlers, a job through its ctx)."""

    def __init__(self, engine: AsyncEngine, info: dict[str, Any] | None = None) -> None:
        self.engine = engine
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self.info = dict(info or {})

    def with_info(self, **info: Any) -> Database:
        """The same database whose transactions carry `info` in `session.info` (e.g. the job queue an after-commit
        hook queues to)."""
        return Database(self.engine, {**self.info, **info})

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """One session and transaction: committed on success, rolled back on error; then the `after_commit`
        hooks."""
        async with self._sessions() as session:
            session.info.update(self.info)
            async with session.begin():
                yield session
            for hook in session.info.pop(AFTER_COMMIT, []):
                await hook()

    @asynccontextmanager
    async def read_session(self) -> AsyncIterator[AsyncSession]:
        """A session for reads that need no transaction (authentication, searches, lists, an item): autocommit,
        so no BEGIN and COMMIT round trips. Each statement sees its own snapshot, as it would in a READ COMMITTED
        transaction; a read that needs one snapshot for several statements uses `read_snapshot`."""
        async with self.engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            async with AsyncSession(bind=auto) as session:
                yield session

    @asynccontextmanager
    async def statement(self) -> AsyncIterator[AsyncSession]:
        """A session whose statements commit each on its own (autocommit): for a write that is one statement, it
        saves the BEGIN and COMMIT round trips."""
        async with self.read_session() as session:
            yield session

    @asynccontextmanager
    async def driver(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The driver's own connection (psycopg), in autocommit, for a one-statement write of fixed SQL on every
        request's path (`%(name)s` parameters): it skips SQLAlchemy's session, compilation and result layers,
        about 0.45 ms of this process's CPU a statement (bench/results/cost.md)."""
        async with self.engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            driver = (await auto.get_raw_connection()).driver_connection
            assert isinstance(driver, psycopg.AsyncConnection)
            yield driver

    @asynccontextmanager
    async def read_snapshot(self) -> AsyncIterator[AsyncSession]:
        """A read-only REPEATABLE READ transaction: every statement sees the same snapshot (a consistent export)."""
        async with self.engine.connect() as conn:
            snap = await conn.execution_options(isolation_level="REPEATABLE READ")
            async with AsyncSession(bind=snap) as session, session.begin():
                await session.execute(text("SET TRANSACTION READ ONLY"))
                yield session

    @asynccontextmanager
    async def try_advisory_lock(self, key: int) -> AsyncIterator[bool]:
        """Hold a session-level advisory lock on `key` while the block runs, if no one else holds it (yields whether
        it was taken). It lives on a connection of its own, so a process that dies releases it with its
        connection."""
        async with self.engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            held = bool((await auto.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key})).scalar())
            try:
                yield held
            finally:
                if held:
                    try:
                        await auto.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                    except Exception:  # the connection is gone, and the lock with it; never hand it back held
                        await conn.invalidate()

    async def ping(self) -> None:
        """One round trip to the database (raises when it cannot be reached)."""
        async with self.read_session() as s:
            await s.execute(text("SELECT 1"))

    async def current_revision(self) -> str | None:
        """The migration the database is at (None before the first one), in one short autocommit statement."""
        async with self.read_session() as s:
            try:
                return (await s.execute(text("SELECT version_num FROM alembic_version"))).scalar()
            except ProgrammingError:
                return None


_database: Database | None = None


def database() -> Database:
    """The process's database (opened by `init_engine`); only the composition root asks for it and hands it on
    (in `Deps`, with the job queue its after-commit nudges go to): every session comes from a `Database`."""
    if _database is None:
        raise RuntimeError("database engine not initialised")
    return _database


def init_engine(url: str, pool_size: int = 20, *, generic_plans: bool = False) -> Database:
    """Create the process-wide async engine (idempotent for the same URL), keeping `pool_size` connections; returns
    its `Database`.

    Connections beyond it are opened for a burst and closed when returned: each costs PostgreSQL a new backend
    and the statements prepared on it, so the kept pool should cover the usual concurrency. With
    `generic_plans`, a statement psycopg has prepared on a connection (after 5 executions) is planned once."""
    global _engine, _url, _database
    if _database is not None and _url == url:
        return _database
    # connect_timeout and pool_timeout make an unreachable database fail fast (503) instead of hanging a request.
    _engine = create_async_engine(url, pool_size=pool_size, max_overflow=10, pool_timeout=10,
                                  connect_args={"connect_timeout": CONNECT_TIMEOUT_SEC})
    if generic_plans:
        _plan_once(_engine)
    _ping_idle_connections(_engine)
    _database = Database(_engine)
    _url = url
    return _database


def _plan_once(engine: AsyncEngine) -> None:
    """Every new connection uses generic plans for its prepared statements: a search's statements are the same
    text for every claim of a scope, and planning them at each execution cost about 0.9 ms each (bench/TUNING.md
    §9). Their shapes are fixed by the SQL (CTEs, forced scan forms), so one plan fits every parameter value."""

    @event.listens_for(engine.sync_engine, "connect")
    def _generic(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("SET plan_cache_mode = force_generic_plan")
        finally:
            cursor.close()
        dbapi_connection.commit()


PING_IDLE_SEC = 2.0


def _ping_idle_connections(engine: AsyncEngine) -> None:
    """Pre-ping, but only for a connection that sat unused for `PING_IDLE_SEC` (or was never used): a busy pool
    skips one round trip per checkout. A connection that fails its ping is replaced (DisconnectionError); one
    broken by a database restart within that window fails its statement, and SQLAlchemy then recycles every
    connection of the pool (a disconnect invalidates the pool)."""

    @event.listens_for(engine.sync_engine, "checkin")
    def _used(_dbapi_connection: Any, record: Any) -> None:
        record.info["lev_used"] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def _ping(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        used = record.info.get("lev_used")
        if used is not None and time.monotonic() - used < PING_IDLE_SEC:
            return
        try:
            alive = engine.sync_engine.dialect.do_ping(dbapi_connection)  # what pool_pre_ping runs
        except Exception as exc:
            raise DisconnectionError("connection failed its ping") from exc
        if not alive:
            raise DisconnectionError("connection failed its ping")


async def dispose_engine() -> None:
    global _engine, _url, _database
    if _engine is not None:
        await _engine.dispose()
    _engine, _url, _database = None, None, None


def migrate(url: str) -> str | None:
    """Apply every Alembic migration (sync; run at start-up and by `lev migrate`).

    A database already at a migration this code does not know (a newer release migrated it: a rolling upgrade
    under way, or a rollback of the code) is left as it is: migrations keep the previous release working. Returns
    that newer revision in that case, else None."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, pool

    here = Path(__file__).parent
    sync = create_engine(url, poolclass=pool.NullPool)
    try:
        with sync.connect() as conn:
            current = _version(conn)
    finally:
        sync.dispose()
    if current is not None and current == written_head():
        return None  # at head already: a restart's common case, without Alembic's upgrade machinery
    if current is not None and not knows_revision(current):
        return current
    cfg = Config()
    cfg.set_main_option("script_location", str(here / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    command.upgrade(cfg, "head")
    return None


def _version(conn: Any) -> str | None:
    try:
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()  # type: ignore[no-any-return]
    except ProgrammingError:
        return None


def knows_revision(revision: str) -> bool:
    """Whether `revision` is one of this code's migrations (False: a newer release's)."""
    from alembic.util.exc import CommandError

    try:
        return _script_dir().get_revision(revision) is not None
    except CommandError:
        return False


def _script_dir() -> Any:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    return ScriptDirectory.from_config(cfg)


_REVISION_LINE = re.compile(r"^(down_)?revision\b[^=\n]*=(.*)$", re.MULTILINE)


def written_head() -> str | None:
    """The newest migration as the revision files write it (read as text: loading them through Alembic took a
    second of every restart); None unless there is exactly one head."""
    revisions: set[str] = set()
    downs: set[str] = set()
    for path in (Path(__file__).parent / "migrations" / "versions").glob("*.py"):
        for m in _REVISION_LINE.finditer(path.read_text()):
            (downs if m.group(1) else revisions).update(re.findall(r"[\"']([^\"']+)[\"']", m.group(2)))
    heads = revisions - downs
    return heads.pop() if len(heads) == 1 else None


def head_revision() -> str | None:
    """The newest migration this code knows."""
    head: str | None = _script_dir().get_current_head()
    return head


_head: str | None = None


def head_revision_cached() -> str | None:
    global _head
    if _head is None:
        _head = head_revision()
    return _head
