"""pgvector 0.8: the `vector` extension updated in place (`ALTER EXTENSION vector UPDATE`) to the version the server
ships, so a data directory made with pgserver's pgvector 0.6.2 runs the package's 0.8 code with its catalog in step.
Search needs 0.8 or newer (iterative index scans, `hnsw.iterative_scan`): on an older server the migration stops
with what to do. Tables, vectors and the HNSW index are kept as they are (pgvector 0.8 reads 0.6's index).

Revision ID: 0023
Revises: 0022
"""

from alembic import op
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

revision = "0023"
down_revision = "0022"

LEAST = (0, 8, 0)


def _parts(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def upgrade() -> None:
    conn = op.get_bind()
    installed, available = conn.execute(text(
        "SELECT e.extversion, a.default_version FROM pg_extension e"
        " JOIN pg_available_extensions a ON a.name = e.extname WHERE e.extname = 'vector'")).one()
    update_failed = None
    if _parts(available) > _parts(installed):
        try:
            with conn.begin_nested():  # a role that does not own the extension cannot update it
                conn.execute(text("ALTER EXTENSION vector UPDATE"))
        except DBAPIError as exc:
            update_failed = str(exc).splitlines()[0]
    version = conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar_one()
    if _parts(version) < LEAST:
        raise RuntimeError(
            f"Lev needs pgvector {'.'.join(map(str, LEAST))} or newer; the database has {version} (the server "
            f"ships {available}). " + (
                f"`ALTER EXTENSION vector UPDATE` failed: {update_failed}; run it as the extension's owner."
                if update_failed else "Install a newer pgvector on the server, then start Lev again."))
