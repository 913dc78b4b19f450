"""Contract-test fixtures: the same live stack as `tests/` (a `lev serve` subprocess on embedded PostgreSQL
and Redis, rate limits off, private URLs allowed) plus a seeded library and one token of each kind.

`LEV_FUZZ_EXAMPLES` bounds how many examples every generated test runs (default small so that
`make test` stays fast; `make fuzz` sets 2000).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.stack import Admin, User, make_item, new_user

FUZZ_EXAMPLES = max(1, int(os.environ.get("LEV_FUZZ_EXAMPLES", "8")))
TOKEN_KINDS = ("whole_write", "whole_read", "one_folder", "two_folder", "none")


CASES: Counter[str] = Counter()


def count_case(label: str) -> None:
    """Count one generated case (reported at the end of the run)."""
    CASES[label] += 1


def pytest_sessionfinish(session: Any) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: hand the counts to the controller
        workeroutput["contract_cases"] = dict(CASES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    CASES.update(getattr(node, "workeroutput", {}).get("contract_cases", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if CASES:
        terminalreporter.write_sep("-", f"contract cases generated (LEV_FUZZ_EXAMPLES={FUZZ_EXAMPLES})")
        for label, n in sorted(CASES.items()):
            terminalreporter.write_line(f"{n:7d}  {label}")


def examples(scale: float = 1.0, floor: int = 1, cap: int | None = None) -> int:
    """The example count for one generated test, scaled from LEV_FUZZ_EXAMPLES."""
    n = max(floor, int(FUZZ_EXAMPLES * scale))
    return min(n, cap) if cap is not None else n


@dataclass
class Library:
    """A seeded user: folders A, B, C, items in several places, and one token per kind. One per test module: the
    REST fuzzing deletes folders (and so revokes the one-folder token), which must not reach other modules."""

    user: User
    folders: dict[str, str]
    items: dict[str, str]
    tokens: dict[str, str | None] = field(default_factory=dict)


@pytest.fixture(scope="module")
def library(admin: Admin, server) -> Library:  # type: ignore[no-untyped-def]
    u = new_user(admin)
    folders = {name: u.folder(name) for name in ("A", "B", "C")}
    items = {
        "in_a": make_item(u, folders=[folders["A"]], title="alpha"),
        "in_ab": make_item(u, folders=[folders["A"], folders["B"]], title="alpha beta"),
        "in_c": make_item(u, folders=[folders["C"]], title="gamma"),
        "unfiled": make_item(u, title="loose"),
        "inert": make_item(u, folders=[folders["A"]], in_kb=False, title="inert"),
    }
    lib = Library(u, folders, items)
    lib.tokens = {
        "whole_write": u.token(write=True, name="whole-write"),
        "whole_read": u.token(name="whole-read"),
        "one_folder": u.token(write=True, folders=[folders["A"]], name="one-folder"),
        "two_folder": u.token(write=True, folders=[folders["A"], folders["B"]], name="two-folder"),
        "none": None,
    }
    return lib
