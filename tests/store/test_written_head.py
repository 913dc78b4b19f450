"""A restart skips Alembic when the database is at the head the revision files write (issue 51): that head, read as
text, is the one Alembic finds, and a second head (a branch not yet merged) makes it say none."""

from __future__ import annotations

from pathlib import Path

from lev.store import db


def test_the_written_head_is_alembics() -> None:
    assert db.written_head() == db.head_revision()


def test_two_heads_make_no_written_head(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    versions = tmp_path / "migrations" / "versions"
    versions.mkdir(parents=True)
    (versions / "a.py").write_text('revision = "0001"\ndown_revision = None\n')
    (versions / "b.py").write_text('revision: str = "0002"\ndown_revision: str | None = "0001"\n')
    monkeypatch.setattr(db, "__file__", str(tmp_path / "db.py"))
    assert db.written_head() == "0002"
    (versions / "c.py").write_text("revision = '0003'\ndown_revision = '0001'\n")
    assert db.written_head() is None
    (versions / "d.py").write_text('revision = "0004"\ndown_revision = ("0002", "0003")\n')
    assert db.written_head() == "0004"
