"""Statements of fixed SQL text, each built once per text: `statement` (`text()`), and `with_vector` for those
that bind the query's vector as pgvector's `vector` (`QueryVector`). A search's texts are few (one per scope shape
and plan), so a search spends no time parsing its statements' bind parameters or computing their cache keys
again."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.types import UserDefinedType


class QueryVector(UserDefinedType[list[float]]):
    """A query's floats bound as pgvector's text form for `CAST(:qvec AS vector)`: rounded to float4 here, then
    written with 9 significant digits, which is exactly that float4, in a third of the time of pgvector's
    `Vector` (shortest repr of each double). Like `Vector` it renders no bind cast: the parameter's type is
    inferred as `vector`, so PostgreSQL parses it once per statement, not once per row it is compared with."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "vector"

    def bind_processor(self, dialect: Any) -> Callable[[list[float] | None], str | None]:
        def process(value: list[float] | None) -> str | None:
            if value is None:
                return None
            floats = np.asarray(value, dtype=np.float32).tolist()  # rounded once, as PostgreSQL would
            return "[" + ",".join(["%.9g"] * len(floats)) % tuple(floats) + "]"

        return process


@lru_cache(maxsize=1024)
def statement(sql: str) -> TextClause:
    """`text(sql)`, built once per SQL text."""
    return text(sql)


@lru_cache(maxsize=1024)
def with_vector(sql: str) -> TextClause:
    """A statement whose `:qvec` is bound as a pgvector `vector` (pass the query's floats), built once per text."""
    return text(sql).bindparams(bindparam("qvec", type_=QueryVector()))
