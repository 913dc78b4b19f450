"""Issue 38 item 1: only a real connection failure is an outage (503). A statement refused on a live connection
(the driver's 65,535-parameter limit, a constraint) is a query error: the caller fails it with a reason, never
retries it as if the database were down."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy.exc
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from lev.core.errors import infrastructure_error, query_error
from lev.store import db
from tests.stack import Admin, free_port


def _raised(admin: Admin, statement: str, params: dict[str, Any]) -> BaseException:
    async def go() -> None:
        async with db.database().transaction() as s:
            await s.execute(text(statement), params)

    with pytest.raises(sqlalchemy.exc.DBAPIError) as caught:
        admin.run_coro(go())
    return caught.value


def test_more_than_65535_parameters_is_a_query_error_not_an_outage(admin: Admin) -> None:
    names = [f"p{n}" for n in range(70_000)]
    exc = _raised(admin, f"SELECT 1 WHERE 1 IN ({', '.join(':' + n for n in names)})", dict.fromkeys(names, 1))
    assert "65535" in str(exc)
    assert query_error(exc) and infrastructure_error(exc) is None
    assert admin.sql("SELECT 1") == [(1,)]  # the connection it failed on serves on


def test_a_refused_statement_is_a_query_error(admin: Admin) -> None:
    exc = _raised(admin, "SELECT 1 / 0", {})
    assert query_error(exc) and infrastructure_error(exc) is None


def test_a_database_that_cannot_be_reached_is_an_outage() -> None:
    async def go() -> BaseException:
        engine = create_async_engine(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/lev",
                                     connect_args={"connect_timeout": 2})
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except sqlalchemy.exc.DBAPIError as exc:
            return exc
        finally:
            await engine.dispose()
        raise AssertionError("connected to a closed port")

    exc = asyncio.run(go())
    assert not query_error(exc)
    found = infrastructure_error(exc)
    assert found is not None and found.status == 503 and found.extra["part"] == "database"
