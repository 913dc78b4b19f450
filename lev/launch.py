"""The `lev` command's entry point: a starting `lev serve` says so before the command line's code loads (seconds
on a busy machine), and counts that time as the step `code`; `lev sync` (a small REST client, lev.sync) runs without
it. `lev.cli` is loaded by name, after that first line: the one deferred import of the project, and the reason this
module exists."""

from __future__ import annotations

import importlib
import sys
import time

from lev.core import steps
from lev.sync import command as sync_command


def main() -> None:
    began = time.monotonic()
    if sys.argv[1:2] == ["sync"]:
        raise SystemExit(sync_command.main(sys.argv[2:]))
    if sys.argv[1:2] == ["serve"]:
        steps.enable(began)
        with steps.step("code", "loading its code"):
            cli = importlib.import_module("lev.cli")
    else:
        cli = importlib.import_module("lev.cli")
    cli.main()


if __name__ == "__main__":
    main()
