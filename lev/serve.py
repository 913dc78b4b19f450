"""Running Lev: the HTTP server (`lev serve`, worker inline by default) and the standalone worker (`lev worker`)."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from typing import Any

from lev.app import create_app
from lev.core.settings import get_settings
from lev.embedded import stop_started_redis
from lev.embedding.minilm import return_freed_memory
from lev.ops import logs, metrics
from tasks.worker import run_worker


def quiet_libraries() -> None:
    """Silence library chatter that says nothing to an operator (model-loading notes, fork advice)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", module="(pgserver|platformdirs)")
    for name in ("pgserver", "alembic", "httpx"):  # start-up chatter at INFO
        logging.getLogger(name).setLevel(logging.WARNING)


def banner(url: str, data_dir: str, lev: str) -> str:
    """What `lev serve` prints once it listens: where, where the data is, and the first steps (browser first)."""
    return "\n".join([
        "",
        f"Lev is ready at {url}  (API docs {url}/api/v1/docs; data in {data_dir})",
        f"  1. open {url}/ in a browser and create your account (the first one owns this server)",
        "  2. add links, notes and files",
        f"  3. connect an agent by URL: claude mcp add --transport http lev {url}/api/mcp  (sign in, click Allow);"
        " or mint a token under Settings -> Integrations",
        f"  from a shell instead: {lev} user create you@example.com --tier pro; "
        f"{lev} token create --user you@example.com --name agent --write",
        "Press Ctrl-C to stop.",
        "",
    ])


def serve(host: str, port: int, *, workers_inline: bool) -> None:
    """`lev serve`: the API on `host:port` (with the worker inline unless told otherwise) until stopped."""
    import uvicorn

    quiet_libraries()
    return_freed_memory()
    settings = get_settings()
    settings.workers_inline = workers_inline
    setup_observability()
    lev = os.path.relpath(sys.argv[0]) if os.path.sep in sys.argv[0] else "lev"
    if not lev.endswith("lev"):
        lev = "lev"

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started and self.servers:
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                host = f"[{host}]" if ":" in host else host
                print(banner(f"http://{host}:{port}", str(settings.data_dir.resolve()), lev), file=sys.stderr,
                      flush=True)

    # SIGTERM/SIGINT: uvicorn stops accepting, lets in-flight requests finish (bounded), then runs the lifespan
    # shutdown, which lets the inline worker's current jobs finish (bounded) and re-queues the rest.
    config = uvicorn.Config(create_app(settings), host=host, port=port, lifespan="on", proxy_headers=False,
                            log_config=None, access_log=False,
                            timeout_graceful_shutdown=int(settings.shutdown_grace_sec))
    try:
        Server(config).run()
    finally:  # then stop the embedded Redis if this process started it (pgserver stops its PostgreSQL itself)
        stop_started_redis()


def setup_observability() -> None:
    settings = get_settings()
    logs.configure(settings.log_level, settings.log_format)
    metrics.configure(settings)


def worker() -> None:
    """`lev worker`: a standalone worker until stopped."""
    quiet_libraries()
    setup_observability()
    try:
        run_worker()
    finally:
        stop_started_redis()
