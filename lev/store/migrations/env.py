"""Alembic environment: runs migrations synchronously over psycopg 3."""

import time

from alembic import context
from sqlalchemy import create_engine, pool

url = context.config.get_main_option("sqlalchemy.url") or ""
connectable = create_engine(url, poolclass=pool.NullPool)
with connectable.connect() as connection:
    # The lock is the session's; each migration then runs in a transaction of its own (a migration may step out
    # of it, e.g. for CREATE INDEX CONCURRENTLY: `op.get_context().autocommit_block()`). A second `lev migrate`
    # waits by trying again outside any transaction: blocked inside pg_advisory_lock it would hold a snapshot,
    # which a concurrent index build in the first one waits for, and PostgreSQL would end one as a deadlock.
    while not connection.exec_driver_sql("SELECT pg_try_advisory_lock(727001)").scalar():
        connection.commit()
        time.sleep(0.2)
    connection.commit()
    try:
        context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        connection.exec_driver_sql("SELECT pg_advisory_unlock(727001)")
        connection.commit()
connectable.dispose()
