"""Structured logs: one JSON object per line on stderr (structlog over the standard library's logging).

Every line written while a request or a job runs carries its `request_id` (or `job_id`), and `user_id` and
`token_id` once the caller is known. Nothing here ever logs a token secret, a password or a body: request
lines name the route template, not the raw path or query string.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_configured = False


def configure(level: str = "info", fmt: str = "json") -> None:
    """Route every logger (ours, uvicorn's, arq's) through one structlog formatter on stderr."""
    global _configured
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(
        colors=False)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
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
