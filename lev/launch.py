"""The `lev` command's entry point: a starting `lev serve` says so before the command line's code loads (seconds)."""

from __future__ import annotations

import sys
import time


def main() -> None:
    began = time.monotonic()
    if sys.argv[1:2] == ["serve"]:
        from lev.core import steps

        steps.enable(began)
        with steps.step("code", "loading its code"):
            from lev.cli import main as cli_main
    else:
        from lev.cli import main as cli_main
    cli_main()
