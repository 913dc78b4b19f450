"""A quiet log (issue 40 item 3): an idle `lev serve` writes nothing at the default level while its cron ticks run
(a tick that did nothing is told at debug, one that did something at info); fields given to a log call appear in
its line in both formats, from structlog loggers and from standard library loggers' `extra=`; `auto` is the console
format on a terminal and JSON otherwise."""

from __future__ import annotations

import io
import json
import logging
import os
import pty
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from lev.embedded import ensure_redis, stop_redis
from lev.ops import logs
from tests.stack import Admin, LiveServer

BANNER_END = "Press Ctrl-C to stop."


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers, root.level = handlers, level


def jobs_done(metrics_dir: Path) -> dict[str, float]:
    """Finished jobs by name, read from the server's metrics files (no request: a request writes a line)."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(metrics_dir))
    done: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == "lev_jobs_total":
                done[sample.labels["job"]] = done.get(sample.labels["job"], 0) + sample.value
    return done


def test_an_idle_server_writes_nothing_while_its_cron_ticks_run(data_dir: Path, admin: Admin, tmp_path: Path) -> None:
    # The database is shared with the tests before this one: work they left unfinished when their servers stopped
    # (a transform, an import, a content, a due feed, a page's archived copy, a deleted item's stored file) would
    # be found and done by this server's reconciler and schedule, and rightly logged. Idle means nothing to do:
    # what they left is settled first.
    admin.sql("UPDATE user_items u SET auto_transform = false WHERE auto_transform "
              "AND NOT EXISTS (SELECT 1 FROM outputs o WHERE o.item_id = u.id)")
    admin.sql("UPDATE imports SET status = 'done' WHERE status = 'running'")
    admin.sql("UPDATE contents SET status = 'failed' WHERE status = 'processing'")
    admin.sql("UPDATE feeds SET next_poll_at = now() + interval '1 day'")
    admin.sql("UPDATE archives SET status = 'failed' WHERE status = 'pending'")
    admin.sql("DELETE FROM object_deletions")
    metrics = tmp_path / "metrics"
    srv = LiveServer(data_dir, {"LEV_REDIS_URL": ensure_redis(tmp_path / "redis"), "LEV_METRICS_DIR": str(metrics),
                                "LEV_LOG_LEVEL": "info"}, log_name="idle").start()
    try:
        deadline = time.monotonic() + 300  # a boot on a busy machine, then a minute's tick
        while BANNER_END not in srv.log_path.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.2)
        started = jobs_done(metrics)
        while not {"reconcile_unfinished", "drain_object_deletions", "schedule_feeds"} <= set(started):
            assert time.monotonic() < deadline, started  # the ticks run at start-up
            time.sleep(0.2)
            started = jobs_done(metrics)
        while sum(jobs_done(metrics).values()) <= sum(started.values()):  # and one more tick, a minute's
            assert time.monotonic() < deadline, started
            time.sleep(0.5)
        time.sleep(1)
        text = srv.log_path.read_text()
        after_banner = [line for line in text.split(BANNER_END, 1)[1].strip().splitlines()
                        if '"logger": "lev.request"' not in line]  # the start-up probe's request
        assert after_banner == [], after_banner
        assert "cron:" not in text and "recording health" not in text, text
    finally:
        srv.stop()
        stop_redis(tmp_path / "redis")


def arq_lines(level: str) -> list[str]:
    """What the log shows at `level` of arq's lines for a cron tick that did nothing, one that did something, and
    a job."""
    out = io.StringIO()
    logs.configure(level, "json", out)
    arq = logging.getLogger("arq.worker")
    arq.info("%6.2fs → %s(%s)%s", 0.01, "cron:drain_object_deletions:1764000000000", "", "")
    arq.info("%6.2fs ← %s ● %s", 0.02, "cron:drain_object_deletions:1764000000000", "0")
    arq.info("%6.2fs → %s(%s)%s", 0.01, "cron:schedule_feeds:1764000000000", "", "")
    arq.info("%6.2fs ← %s ● %s", 0.02, "cron:schedule_feeds:1764000000000", "3")
    arq.info("%6.2fs → %s(%s)%s", 0.01, "process_content:abc:process_content", "abc", "")
    arq.info("%6.2fs ← %s ● %s", 0.50, "process_content:abc:process_content", "")
    arq.info("recording health: %s", "j_complete=3")
    return [json.loads(line)["event"] for line in out.getvalue().splitlines()]


def test_a_cron_tick_that_did_nothing_logs_at_debug(restore_logging: None) -> None:
    shown = arq_lines("info")
    assert not any("drain_object_deletions" in line for line in shown), shown
    assert [line for line in shown if "schedule_feeds" in line] == [
        "  0.02s ← cron:schedule_feeds:1764000000000 ● 3"]  # a tick that did something: its end, at info
    assert sum("process_content" in line for line in shown) == 2  # a job's start and end stay at info
    assert not any("recording health" in line for line in shown)
    everything = arq_lines("debug")
    assert len(everything) == 7 and sum("drain_object_deletions" in line for line in everything) == 2


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_fields_of_a_log_call_appear_in_its_line(fmt: str, restore_logging: None) -> None:
    out = io.StringIO()
    logs.configure("info", fmt, out)
    logs.get_logger("lev.test").warning("structured", feed_id="f-1", failures=3)
    logging.getLogger("lev.test.stdlib").warning("plain %s", "text", extra={"entry_line": 17, "why": "404"})
    first, second = out.getvalue().splitlines()
    if fmt == "json":
        one, two = json.loads(first), json.loads(second)
        assert (one["event"], one["feed_id"], one["failures"], one["level"]) == ("structured", "f-1", 3, "warning")
        assert (two["event"], two["entry_line"], two["why"]) == ("plain text", 17, "404")
    else:
        assert "structured" in first and "feed_id=f-1" in first and "failures=3" in first
        assert "plain text" in second and "entry_line=17" in second and "why=404" in second
        assert not first.lstrip().startswith("{")


def test_auto_is_console_on_a_terminal_and_json_otherwise(restore_logging: None) -> None:
    assert logs.resolve_format("auto", io.StringIO()) == "json"
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as tty:
            assert logs.resolve_format("auto", tty) == "console"
            assert logs.resolve_format("json", tty) == "json"  # LEV_LOG_FORMAT wins
            assert logs.resolve_format("console", io.StringIO()) == "console"
    finally:
        os.close(leader)
        os.close(follower)


def test_one_logging_style() -> None:
    """Every module logs through `lev.ops.logs.get_logger` (structlog, keyword fields); only the log set-up itself
    and the server's quieting of libraries touch the standard library's loggers."""
    root = Path(__file__).resolve().parents[2] / "lev"
    allowed = {root / "ops" / "logs.py", root / "serve.py"}
    offenders = [str(p.relative_to(root)) for p in sorted(root.rglob("*.py"))
                 if p.resolve() not in allowed and "logging.getLogger(" in p.read_text()]
    assert offenders == [], offenders
