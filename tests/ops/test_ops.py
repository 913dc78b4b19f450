"""Operations endpoints and signals: /healthz, /readyz (and its 503), /metrics, JSON logs, 503 `unavailable`
for an unreachable database, and `lev migrate` racing itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from lev.store.db import head_revision
from tests.stack import ROOT, LiveServer, free_port


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus exposition text (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_healthz_and_readyz(server: LiveServer) -> None:
    r = httpx.get(f"{server.url}/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    r = httpx.get(f"{server.url}/readyz")
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "ready", "checks": {"database": "ok", "migrations": "ok", "redis": "ok",
                                                      "object_store": "ok"}}


@pytest.fixture(scope="module")
def unready(data_dir: Path, admin) -> Iterator[tuple[LiveServer, str]]:  # type: ignore[no-untyped-def]
    """A server on its own database whose object store (S3) points at a closed port."""
    from lev.embedded import resolve_urls

    base, _ = resolve_urls(None, None, data_dir)
    plain = base.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS lev_ready")
        conn.execute("CREATE DATABASE lev_ready")
    url = base.replace("/lev?", "/lev_ready?", 1)
    srv = LiveServer(data_dir, {"LEV_DATABASE_URL": url, "LEV_OBJECT_STORE": "s3", "LEV_S3_BUCKET": "b",
                                "LEV_S3_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
                                "LEV_S3_ACCESS_KEY": "k", "LEV_S3_SECRET_KEY": "s"}, log_name="unready").start()
    yield srv, plain.replace("/lev?", "/lev_ready?", 1)
    srv.stop()


def test_readyz_names_the_failed_parts(unready: tuple[LiveServer, str]) -> None:
    srv, db_url = unready
    r = httpx.get(f"{srv.url}/readyz", timeout=10)
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["error"] == "unavailable" and body["failed"] == ["object_store"]
    assert body["checks"]["database"] == "ok" and body["checks"]["redis"] == "ok"
    assert body["checks"]["object_store"] != "ok" and "object_store" in body["message"]
    assert r.headers["retry-after"] == str(body["retry_after_sec"])
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0002'")
        try:
            body = httpx.get(f"{srv.url}/readyz", timeout=10).json()
        finally:
            conn.execute("UPDATE alembic_version SET version_num = %s", (head_revision(),))
    assert body["failed"] == ["migrations", "object_store"]
    assert "0002" in body["checks"]["migrations"] and "lev migrate" in body["checks"]["migrations"]
    assert httpx.get(f"{srv.url}/healthz").status_code == 200  # alive, just not ready


def test_metrics_count_requests_jobs_embeddings_and_refusals(server: LiveServer, user, api) -> None:  # type: ignore[no-untyped-def]
    before = httpx.get(f"{server.url}/metrics").text
    c = api(user.token(write=True, write_cap=1))
    assert c.post("/api/v1/ingest", json={"kind": "text", "text": "metrics probe about otters"}).status_code == 200
    refused = c.post("/api/v1/ingest", json={"kind": "text", "text": "a second write"})
    assert refused.status_code == 429 and refused.json()["limit"] == "monthly_writes"
    assert c.get("/api/v1/search", params={"q": "otters"}).status_code == 200
    assert c.get("/api/v1/items/not-a-uuid").status_code == 400
    r = httpx.get(f"{server.url}/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    after = r.text

    def grew(name: str, by: float = 1, **labels: str) -> bool:
        return _sample(after, name, **labels) - _sample(before, name, **labels) >= by

    assert grew("lev_http_requests_total", route="POST /api/v1/ingest", surface="rest", status="200")
    assert grew("lev_http_requests_total", route="POST /api/v1/ingest", surface="rest", status="429")
    assert grew("lev_http_requests_total", route="GET /api/v1/items/{id}", surface="rest", status="400")
    assert grew("lev_http_request_duration_seconds_count", route="GET /api/v1/search", surface="rest")
    assert grew("lev_rate_limit_refusals_total", limit="monthly_writes")
    assert grew("lev_embedding_seconds_count", kind="query") and grew("lev_embedding_seconds_count", kind="chunks")
    assert _sample(after, "lev_jobs_total", job="drain_object_deletions", outcome="ok") >= 1
    assert _sample(after, "lev_job_duration_seconds_count", job="drain_object_deletions") >= 1
    for gauge in ("lev_queue_depth", "lev_queue_oldest_age_seconds", "lev_jobs_in_progress"):
        assert f"\n{gauge} " in after
    # unknown paths share one label instead of growing the series without bound
    httpx.get(f"{server.url}/no/such/{os.urandom(4).hex()}")
    page = f"/folders/{uuid.uuid4()}"  # a web page is named by its route, as an operation is
    httpx.get(f"{server.url}{page}")
    scraped = httpx.get(f"{server.url}/metrics").text
    assert "/no/such/" not in scraped and page not in scraped
    assert 'lev_http_requests_total{route="GET /folders/{id}",status="303",surface="web"}' in scraped, scraped


def test_json_logs_carry_ids_never_secrets(server: LiveServer, user, api) -> None:  # type: ignore[no-untyped-def]
    token = user.token(write=True)
    secret_text = "log-canary-" + os.urandom(6).hex()
    r = api(token).post("/api/v1/ingest", json={"kind": "text", "text": secret_text, "title": secret_text})
    assert r.status_code == 200
    request_id = r.headers["x-request-id"]
    found: list[dict[str, object]] = []
    for _ in range(100):  # the line is written just after the response is sent
        lines = [json.loads(x) for x in server.log_path.read_text().splitlines() if x.startswith("{")]
        found = [x for x in lines if x.get("request_id") == request_id and x["event"] == "request"]
        if found:
            break
        time.sleep(0.05)
    assert found, server.log_path.read_text()[-3000:]
    line = found[0]
    assert line["route"] == "POST /api/v1/ingest" and line["status"] == 200 and line["surface"] == "rest"
    assert line["user_id"] == str(user.id) and line["token_id"]
    assert line["level"] == "info" and "timestamp" in line
    text = server.log_path.read_text()
    assert token not in text and token[4:] not in text and secret_text not in text


def test_unreachable_database_is_503_unavailable() -> None:
    from lev.core.errors import to_api_error

    with pytest.raises(psycopg.OperationalError) as info:
        psycopg.connect(f"postgresql://x@127.0.0.1:{free_port()}/x", connect_timeout=2)
    err = to_api_error(info.value)
    assert err.status == 503 and err.code == "unavailable" and err.extra["part"] == "database"
    assert err.headers["Retry-After"] == str(err.extra["retry_after_sec"])
    import redis

    with pytest.raises(redis.ConnectionError) as rinfo:
        redis.Redis(port=free_port(), socket_connect_timeout=1).ping()
    assert to_api_error(rinfo.value).extra["part"] == "redis"
    assert to_api_error(ValueError("a bug")).status == 500


def test_concurrent_lev_migrate_runs_serialize(data_dir: Path, admin) -> None:  # type: ignore[no-untyped-def]
    """Three `lev migrate` at once on an empty database: the advisory lock lets one apply, the others wait."""
    from lev.embedded import resolve_urls

    base, _ = resolve_urls(None, None, data_dir)
    plain = base.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS lev_migrate_race")
        conn.execute("CREATE DATABASE lev_migrate_race")
    env = {**os.environ, "LEV_DATABASE_URL": base.replace("/lev?", "/lev_migrate_race?", 1),
           "LEV_DATA_DIR": str(data_dir)}
    procs = [subprocess.Popen([sys.executable, "-m", "lev.cli", "migrate"], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    outs = [p.communicate(120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    with psycopg.connect(plain.replace("/lev?", "/lev_migrate_race?", 1), autocommit=True) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(head_revision(),)]
        # a newer release migrated the database (a rolling upgrade under way, or this code rolled back to): this
        # release starts on it as it is instead of failing on a revision it does not know
        conn.execute("UPDATE alembic_version SET version_num = '9999_newer'")
        from lev.store import db

        assert db.migrate(env["LEV_DATABASE_URL"]) == "9999_newer"
        assert not db.knows_revision("9999_newer") and db.knows_revision(head_revision() or "")
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("9999_newer",)]


def test_sigterm_finishes_in_flight_requests_and_the_current_job(data_dir: Path, admin, user, transcribe_stub,  # type: ignore[no-untyped-def]
                                                                   tmp_path: Path) -> None:
    """SIGTERM: the listener closes at once, a request in flight still gets its answer, the inline worker's
    running transcription finishes, then the process exits."""
    import signal
    import threading
    import uuid

    from lev.embedded import ensure_redis, stop_redis
    from tests import fixtures_media as fm
    from tests.ingest.test_uploads import upload
    from tests.sites import Site
    from tests.stack import Api

    own_redis = tmp_path / "redis"  # its own queue: the session server's worker must not take the job
    srv = LiveServer(data_dir, {"LEV_RATE_LIMITS": "off", "LEV_ALLOW_PRIVATE_URLS": "true",
                                "LEV_TRANSCRIBE_URL": transcribe_stub.url, "LEV_SHUTDOWN_GRACE_SEC": "20",
                                "LEV_REDIS_URL": ensure_redis(own_redis)}, log_name="sigterm").start()
    site = Site()
    try:
        c = Api(srv.url, user.token(write=True))
        name = f"slow-{uuid.uuid4().hex[:8]}.wav"
        transcribe_stub.delay(name, 4.0)
        _, r = upload(c, fm.make_wav(tmp_path / name, seconds=2.0), "audio/wav", auto_transform=False)
        assert r.status_code == 200 and r.json()["status"] == "transcribing", r.text
        item_id = r.json()["user_item_id"]
        answers: list[httpx.Response] = []
        slow = threading.Thread(target=lambda: answers.append(c.post("/api/v1/ingest", json={
            "kind": "url", "url": f"{site.url}/slow/{uuid.uuid4().hex[:8]}?s=3"})))
        slow.start()
        time.sleep(1.0)  # the page fetch and the transcription are both under way
        assert srv.proc is not None
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{srv.url}/healthz", timeout=2)
        slow.join(30)
        assert answers and answers[0].status_code == 200 and answers[0].json()["status"] == "ready", answers
        assert srv.proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it is done
        row = admin.sql("SELECT status, transcription_status FROM user_items WHERE id = :i", i=item_id)[0]
        assert tuple(row) == ("ready", "done")
        assert len(transcribe_stub.calls(name)) == 1
    finally:
        site.close()
        srv.stop()
        stop_redis(own_redis)
