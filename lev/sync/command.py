"""`lev sync DIR --url URL --folder NAME [--token T] [--delete] [--watch]`: keep a local folder in a Lev folder,
through the REST API alone (any Lev, local or not). Sub-folders become folders named by their path (`NAME/Projects`).
The token comes from `--token` or LEV_TOKEN (a whole-library token with write). Exit status: 0 when every file is
in step, 1 when some failed, 2 when the run could not start or was stopped by the server."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any

from lev.sync.client import Client, SyncError
from lev.sync.run import Progress, Summary, Sync, watch
from lev.sync.tree import State, check_folder, state_path

HELP = "keep a local folder in a Lev folder through the REST API (new and changed files sent, sub-folders mirrored)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="the local folder to keep in Lev")
    p.add_argument("--url", required=True, help="the Lev to send it to (its address, e.g. https://lev.example.org)")
    p.add_argument("--folder", required=True, metavar="NAME",
                   help="the Lev folder DIR becomes (its sub-folders become NAME/SUB)")
    p.add_argument("--token", help="a whole-library token with write (default: the LEV_TOKEN variable)")
    p.add_argument("--delete", action="store_true", help="also delete the items whose file is gone from DIR")
    p.add_argument("--watch", action="store_true", help="keep going: sync again whenever files in DIR change")
    p.add_argument("--no-state", action="store_true",
                   help="remember nothing between runs (every file is read again; refused files are sent again)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lev sync", description=HELP[0].upper() + HELP[1:] + ".")
    add_arguments(p)
    return p


def run(args: argparse.Namespace, *, stop: threading.Event | None = None, client: Client | None = None) -> int:
    """Sync as `args` say; the exit status."""
    root = Path(args.dir).expanduser()
    token = args.token or os.environ.get("LEV_TOKEN", "")
    problem = (None if root.is_dir() else f"{args.dir} is not a folder") or check_folder(args.folder) or (
        None if token else "no token: pass --token or set LEV_TOKEN")
    if problem:
        print(f"lev sync: {problem}", file=sys.stderr)
        return 2
    root = root.resolve()
    own = client is None
    http = client or Client(args.url, token)
    state = State(None if args.no_state else state_path(args.url, root, args.folder))
    sync = Sync(http, root, args.folder, delete=args.delete, state=state, progress=Progress(sys.stderr))
    failed = False

    def report(summary: Summary) -> None:
        nonlocal failed
        failed = failed or bool(summary.failed)
        print(f"lev sync: {summary.line()}", flush=True)

    try:
        report(sync.once())
        if args.watch:
            print(f"lev sync: watching {root} (Ctrl-C stops)", file=sys.stderr, flush=True)
            watch(sync, report, stop)
    except SyncError as exc:
        sync.progress.done()
        print(f"lev sync: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        sync.progress.done()
        return 1 if failed else 0
    finally:
        if own:
            http.close()
    return 1 if failed else 0


def main(argv: list[str] | None = None, **kwargs: Any) -> int:
    return run(parser().parse_args(argv), **kwargs)
