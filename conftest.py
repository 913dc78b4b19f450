"""Session fixtures shared by tests/ and contract_tests/: one embedded stack in a fresh data dir, a live server on
it, and an admin handle (one per process: the admin re-points the store's engine, so two stacks would collide)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cimd_site import LoopbackCA
from tests.stack import Admin, Api, LiveServer, User, new_user
from tests.transcribe_stub import TranscribeStub

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# A test's HTTP call that names no timeout waits up to two minutes, not httpx's 5 s: on a busy machine (the suite
# twice at once, load 9 on 2 cores) a server answers late, never wrongly. Lev's own clients always name theirs.
GENEROUS = httpx.Timeout(120.0, connect=30.0)
for _call in (httpx.request, httpx.get, httpx.post, httpx.put, httpx.patch, httpx.delete, httpx.head, httpx.options,
              httpx.Client.__init__, httpx.AsyncClient.__init__):
    assert _call.__kwdefaults__ is not None and "timeout" in _call.__kwdefaults__, _call
    _call.__kwdefaults__["timeout"] = GENEROUS


# The files that take longest (seconds of one worker, from a whole run's junit report, 2026-12-02) start first:
# `make test` runs xdist with --dist loadfile --no-loadscope-reorder, so no long file is left running alone at the
# end while the other workers idle (xdist's own order, by number of tests, started the crash tests last).
SLOW_FIRST = (
    "tests/cluster/test_cluster.py",  # 185 s
    "tests/ops/test_supervision.py",  # 167
    "tests/feeds/test_feed_crash.py",  # 161
    "contract_tests/test_rest_schemathesis.py",  # 151
    "tests/ingest/test_fair_share.py",  # 89
    "tests/webhooks/test_delivery_crash.py",  # 81
    "tests/ops/test_crash.py",  # 77
    "tests/limits/test_limits_activity.py",  # 75
    "tests/cli/test_cli.py",  # 68
    "tests/ops/test_wheel.py",  # 55
    "tests/web/test_first_hour.py",  # 55
    "tests/ops/test_engine.py",  # 54
    "tests/cli/test_cli_admin.py",  # 51
    "tests/ops/test_ops.py",  # 48
    "tests/auth/test_sign_in_hardening.py",  # 47
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: n for n, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(SLOW_FIRST)))  # stable: the rest keep order


@pytest.fixture(scope="session")
def data_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="levt-", dir="/tmp"))
    os.environ["LEV_DATA_DIR"] = str(d)
    # atexit runs last-registered first: this runs after pgserver has stopped its server.
    atexit.register(shutil.rmtree, d, True)
    yield d
    from lev.embedded import stop_redis

    stop_redis(d)


@pytest.fixture(scope="session")
def admin(data_dir: Path) -> Iterator[Admin]:
    from lev.embedded import resolve_urls
    from lev.store import db

    db_url, redis_url = resolve_urls(None, None, data_dir)
    db.migrate(db_url)
    a = Admin(db_url, redis_url)
    new_user(a)  # the instance has its owner already: sign-ups in the tests are later accounts (LEV_SIGNUP_TIER)
    yield a
    a.close()


@pytest.fixture(scope="session")
def transcribe_stub() -> Iterator[TranscribeStub]:
    """The transcription provider stand-in (OpenAI API on loopback) the session server talks to."""
    stub = TranscribeStub()
    yield stub
    stub.close()


@pytest.fixture(scope="session")
def loopback_ca(data_dir: Path) -> LoopbackCA:
    """A throwaway CA the session server trusts (LEV_OUTBOUND_CA_FILE), for https stand-ins on loopback."""
    return LoopbackCA(data_dir / "tls")


@pytest.fixture(scope="session")
def server(data_dir: Path, admin: Admin, transcribe_stub: TranscribeStub,
           loopback_ca: LoopbackCA) -> Iterator[LiveServer]:
    # Every test signs up and in from 127.0.0.1: the per-address budgets are tested on servers of their own.
    srv = LiveServer(data_dir, {"LEV_RATE_LIMITS": "off", "LEV_ALLOW_PRIVATE_URLS": "true",
                                "LEV_LIMIT_SIGN_IN_IP": "100000/15 minutes", "LEV_LIMIT_SIGN_UP_IP": "100000/hour",
                                "LEV_LIMIT_CLIENT_REGISTRATION_IP": "100000/hour",
                                "LEV_OUTBOUND_CA_FILE": str(loopback_ca.ca_file),
                                "LEV_TRANSCRIBE_URL": transcribe_stub.url}).start()
    yield srv
    srv.stop()


@pytest.fixture
def user(admin: Admin) -> User:
    return new_user(admin)


@pytest.fixture
def api(server: LiveServer):  # type: ignore[no-untyped-def]
    def make(token: str | None) -> Api:
        return Api(server.url, token)

    return make
