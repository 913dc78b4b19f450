"""Alembic environment: runs migrations synchronously over psycopg 3."""

from alembic import context
from sqlalchemy import create_engine, pool

url = context.config.get_main_option("sqlalchemy.url") or ""
connectable = create_engine(url, poolclass=pool.NullPool)
with connectable.connect() as connection:
    connection.exec_driver_sql("SELECT pg_advisory_lock(727001)")
    connection.commit()  # the lock is the session's; each migration then runs in a transaction of its own (a
    # migration may step out of it, e.g. for CREATE INDEX CONCURRENTLY: `op.get_context().autocommit_block()`)
    try:
        context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        connection.exec_driver_sql("SELECT pg_advisory_unlock(727001)")
        connection.commit()
connectable.dispose()
