"""Persistence: SQLAlchemy models, Alembic migrations, queries (search included) and object storage."""
