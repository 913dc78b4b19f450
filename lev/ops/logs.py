"""Structured logs on stderr: one JSON object per line, or the readable console format when stderr is a terminal
(`LEV_LOG_FORMAT` `auto`, the default; `json` or `console` decide it outright). structlog over the standard
library's logging, one style: `log = logs.get_logger(name)`, `log.info("what happened", field=value)`; fields given
to a standard library logger as `extra=` appear too, in both formats.

Every line written while a request or a job runs carries its `request_id` (or `job_id`), and `user_id` and
`token_id` once the caller is known. Nothing here ever logs a token secret, a password or a body: request
lines name the route template, not the raw path or query string.

An idle server writes nothing at the default level: arq's lines for a cron tick go to debug unless the tick did
something (its result is not empty), and so do its start-up and health lines (`QuietJobs`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

_configured = False
JOB_LOGGER = "arq.worker"
NOTHING_DONE = frozenset({"", "0", "None", "False", "[]", "()", "{}"})


class QuietJobs(logging.Filter):
    """Lowers to debug arq's lines about cron ticks that did nothing, its start-up lines and its health lines;
    a job's start and end stay at info for every other job (and for a cron tick that did something)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != JOB_LOGGER or record.levelno != logging.INFO or not self._idle(record):
            return True
        if not logging.getLogger().isEnabledFor(logging.DEBUG):
            return False
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True

    @staticmethod
    def _idle(record: logging.LogRecord) -> bool:
        msg, args = str(record.msg), record.args if isinstance(record.args, tuple) else ()
        if msg.startswith(("Starting worker for", "recording health", "redis_version=")):
            return True
        cron = len(args) >= 2 and str(args[1]).startswith("cron:")
        if " → " in msg:  # a start: a cron tick's is told with its end, if it did something
            return cron
        if " ← " in msg:
            return cron and str(args[2] if len(args) > 2 else "").strip() in NOTHING_DONE
        return False


def _drop_color(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """uvicorn passes a coloured copy of its message as an extra field: the line has the message already."""
    event.pop("color_message", None)
    return event


def resolve_format(fmt: str, stream: TextIO) -> str:
    """`console` or `json`: `auto` is console on a terminal."""
    fmt = fmt.lower()
    if fmt == "auto":
        return "console" if stream.isatty() else "json"
    return "console" if fmt == "console" else "json"


def configure(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Route every logger (ours, uvicorn's, arq's) through one structlog formatter on stderr (or `stream`)."""
    global _configured
    stream = stream or sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (structlog.processors.JSONRenderer() if resolve_format(fmt, stream) == "json"
                     else structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder(), _drop_color],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.addFilter(QuietJobs())
    # No format here shows a record's caller, thread or process: the standard library's optimisation settings for
    # that (Logging HOWTO, "Optimization") spare each line a stack walk and the thread and process look-ups.
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "arq", "arq.worker"):
        logging.getLogger(name).handlers = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True  # our request line replaces it (no raw query strings)
    _configured = True


def get_logger(name: str) -> Any:
    return structlog.stdlib.get_logger(name)


def bind(**values: Any) -> None:
    """Attach fields to every log line of the current request or job."""
    structlog.contextvars.bind_contextvars(**{k: str(v) if v is not None else None for k, v in values.items()})


def new_context(**values: Any) -> None:
    structlog.contextvars.clear_contextvars()
    bind(**values)
