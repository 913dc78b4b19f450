"""The `lev` command's front door: `lev sync` is a small REST client (lev.sync) and starts without the server's
modules; every other command is lev.cli's, imported only then (importlib: a module-level import would load the
whole app before `lev sync` could start)."""

from __future__ import annotations

import importlib
import sys

from lev.sync import command as sync_command


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["sync"]:
        raise SystemExit(sync_command.main(args[1:]))
    importlib.import_module("lev.cli").main(args)


if __name__ == "__main__":
    main()
