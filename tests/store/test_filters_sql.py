"""lev.store.filters inside the scope's SQL parts: every part of one search statement is compiled on its own, so a
filter's value must be bound under the same name in each (scopes with several shared folders included)."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from lev.store.filters import Filters
from lev.store.scope import Scope
from lev.store.scoped_sql import bound_params, item_sql, probe_sql, scope_sql


@pytest.mark.parametrize("folder_scoped", [False, True])
def test_every_part_binds_the_filters_alike(folder_scoped: bool) -> None:
    shared = sorted(uuid.uuid4() for _ in range(3))
    own = uuid.uuid4()
    scope = Scope(uuid.uuid4(), frozenset([*shared, own]) if folder_scoped else None, True, uuid.uuid4(),
                  frozenset(shared))
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for folder in [None, own, *shared]:
        f = Filters(folder_id=folder, item_id=uuid.uuid4(), kinds=("page", "pdf", "text"), site="example.org",
                    after=when, before=when + dt.timedelta(days=30))
        parts = (scope_sql(scope, f), probe_sql(scope, f, "c.content_id"), item_sql(scope, f))
        values = bound_params(*parts)
        assert (values["f_rsite"], values["f_rsite_lo"], values["f_rsite_hi"]) == (
            "gro.elpmaxe", "gro.elpmaxe.", "gro.elpmaxe/")
        assert values["f_after"] == when and {values["f_kinds_1"], values["f_kinds_2"]} == {"pdf", "text"}
        assert (values.get("f_folder") == folder) if folder else "f_folder" not in values
