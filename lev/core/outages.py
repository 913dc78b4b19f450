"""Whether an exception says a part Lev depends on (the database, Redis, the object store) cannot be reached right
now, or is a statement refused on a live connection (a bug of the statement). `lev.core.errors` turns the answer
into 503 `unavailable`; nothing here builds an error."""

from __future__ import annotations

import botocore.exceptions
import psycopg
import redis.exceptions
import sqlalchemy.exc

# SQLSTATE classes of a database that cannot serve now (connection, transaction rollback, insufficient resources,
# object not in prerequisite state, operator intervention, system error): retry shortly
OUTAGE_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "55", "57", "58"})
MESSAGES = {
    "database": "The database is unavailable right now; retry shortly.",
    "object_store": "The object store is unavailable right now; retry shortly.",
    "redis": "The job queue and limiter store (Redis) is unavailable right now; retry shortly.",
}


def query_error(exc: BaseException) -> bool:
    """Whether `exc` is a statement refused on a live connection (by the driver before sending it, e.g. more than
    65,535 parameters, or by the database for a reason other than its state): a bug of the statement, never an
    outage. The connection failures SQLAlchemy notices invalidate their connection; a failed connect has no
    statement."""
    if not isinstance(exc, sqlalchemy.exc.DBAPIError) or exc.connection_invalidated or exc.statement is None:
        return False
    state = getattr(exc.orig, "sqlstate", None)
    return state is None or state[:2] not in OUTAGE_SQLSTATE_CLASSES


def unreachable_part(exc: BaseException) -> str | None:
    """The part (a key of MESSAGES) `exc` or one of its causes says cannot be reached (down, restarting, pool
    exhausted); None for anything else, a statement refused on a live connection included (`query_error`)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if query_error(cur):
            return None
        if isinstance(cur, (psycopg.OperationalError, psycopg.InterfaceError, sqlalchemy.exc.TimeoutError)) or (
                isinstance(cur, sqlalchemy.exc.DBAPIError) and (
                    cur.connection_invalidated or isinstance(cur, (sqlalchemy.exc.OperationalError,
                                                                sqlalchemy.exc.InterfaceError)))):
            return "database"
        if isinstance(cur, (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectionClosedError,
                            botocore.exceptions.ConnectTimeoutError, botocore.exceptions.ReadTimeoutError)):
            return "object_store"
        if isinstance(cur, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
            return "redis"
        cur = cur.__cause__ or cur.__context__
    return None
