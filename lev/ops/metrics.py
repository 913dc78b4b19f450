"""Prometheus metrics in multiprocess mode: every API and worker process on a machine writes to one directory
(`LEV_METRICS_DIR`, default `<data_dir>/metrics`) and `GET /metrics` aggregates it.

`configure()` must run before prometheus-client is imported anywhere in the process (the CLI and the app
factory call it first); the metric objects are created on first use.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from lev.core.settings import Settings

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
JOB_BUCKETS = (0.05, 0.25, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_configured: Path | None = None


def metrics_dir(settings: Settings) -> Path:
    return Path(settings.metrics_dir) if settings.metrics_dir else Path(settings.data_dir).resolve() / "metrics"


def configure(settings: Settings | None = None) -> Path | None:
    """Point prometheus-client at the shared directory (kept if the environment already names one) and drop
    the files of processes that no longer run (their counters restart from zero, which Prometheus expects). The
    composition root configures it at start; a process that never did (a one-off command, a test) counts in its
    own memory, and leaves the environment its children inherit alone."""
    global _configured
    if settings is None:
        return _configured
    path = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or metrics_dir(settings))
    if _configured == path:
        return path
    path.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    for f in path.glob("*.db"):
        pid = f.stem.rsplit("_", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            f.unlink(missing_ok=True)
    _configured = path
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Metrics:
    def __init__(self) -> None:
        configure()
        from prometheus_client import Counter, Histogram

        self.requests = Counter("lev_http_requests_total", "HTTP requests by route, surface and status",
                                ["route", "surface", "status"])
        self.latency = Histogram("lev_http_request_duration_seconds", "HTTP request latency",
                                 ["route", "surface"], buckets=LATENCY_BUCKETS)
        self.jobs = Counter("lev_jobs_total", "Background jobs finished, by job and outcome", ["job", "outcome"])
        self.job_duration = Histogram("lev_job_duration_seconds", "Background job duration", ["job"],
                                      buckets=JOB_BUCKETS)
        self.embedding = Histogram("lev_embedding_seconds", "Time spent computing embeddings", ["kind"],
                                   buckets=LATENCY_BUCKETS)
        self.refusals = Counter("lev_rate_limit_refusals_total", "Requests refused by a rate limit or write cap",
                                ["limit"])
        self.principal_cache = Counter("lev_principal_cache_total", "Bearer authentications answered from the "
                                       "principal cache (hit) or by the database (miss)", ["result"])


@lru_cache(maxsize=1)
def metrics() -> _Metrics:
    return _Metrics()


_request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}


def observe_request(route: str, surface: str, status: int, seconds: float) -> None:
    # The labelled children kept per (route, surface, status): `labels()` checks and looks them up under a lock at
    # every call. Routes are bounded (`lev.middleware.metric_route`), and so are these.
    children = _request_children.get((route, surface, status))
    if children is None:
        m = metrics()
        children = _request_children[(route, surface, status)] = (m.requests.labels(route, surface, str(status)),
                                                                 m.latency.labels(route, surface))
    children[0].inc()
    children[1].observe(seconds)


def observe_job(job: str, outcome: str, seconds: float) -> None:
    m = metrics()
    m.jobs.labels(job, outcome).inc()
    m.job_duration.labels(job).observe(seconds)


@lru_cache(maxsize=4)
def _principal_child(result: str) -> Any:
    return metrics().principal_cache.labels(result)


def count_principal(result: str) -> None:
    _principal_child(result).inc()


def count_refusal(limit: str) -> None:
    metrics().refusals.labels(limit).inc()


@contextmanager
def embedding_timer(kind: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        metrics().embedding.labels(kind).observe(time.perf_counter() - started)


def mark_process_dead(pid: int | None = None) -> None:
    """Drop this process's live gauges from the shared directory (its counters stay summed)."""
    if configure() is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid or os.getpid())


def render(queue: dict[str, float] | None = None) -> bytes:
    """The exposition text: every process's metrics from the shared directory plus the queue gauges."""
    metrics()
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess
    from prometheus_client.core import GaugeMetricFamily

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    if queue is not None:
        snapshot = dict(queue)

        class _Queue:
            def collect(self) -> Iterator[Any]:
                yield GaugeMetricFamily("lev_queue_depth", "Jobs waiting in the queue", value=snapshot["depth"])
                yield GaugeMetricFamily("lev_queue_oldest_age_seconds", "Age of the oldest queued job",
                                        value=snapshot["oldest_age"])
                yield GaugeMetricFamily("lev_jobs_in_progress", "Jobs being run by a worker now",
                                        value=snapshot["in_progress"])

        registry.register(_Queue())
    return generate_latest(registry)
