"""The `lev` CLI's listings, help and settings table, and data surviving a restart (test_cli.py has the flows)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx

from tests.cli.test_cli import lev
from tests.stack import ROOT, LiveServer


def test_data_survives_restart(data_dir: Path, admin) -> None:
    from tests.stack import new_user

    user = new_user(admin)
    folder = user.folder("Persistent")
    token = user.token()
    srv = LiveServer(data_dir, log_name="restart").start()
    srv.stop()
    srv = LiveServer(data_dir, log_name="restart2").start()
    try:
        got = httpx.get(f"{srv.url}/api/v1/folders", headers={"Authorization": f"Bearer {token}"}).json()
        assert [f["id"] for f in got["folders"]] == [folder]
    finally:
        srv.stop()


def test_cli_lists_users_and_folders_and_names_set_tier(server) -> None:
    email = f"list{uuid.uuid4().hex[:8]}@example.com"
    r = lev("user", "create", email)
    assert r.returncode == 0 and f"lev user set-tier {email} pro" in r.stderr, r.stderr  # free tier: says how
    r = lev("token", "create", "--user", email, "--name", "x")
    assert r.returncode == 2 and f"lev user set-tier {email} pro" in r.stderr, r.stderr
    assert "set-tier" not in lev("user", "create", f"p{email}", "--tier", "pro").stderr
    folder = lev("folder", "create", "--user", email, "Reading").stdout.strip()
    users = lev("user", "list")
    assert users.returncode == 0, users.stderr
    row = next(line.split("\t") for line in users.stdout.splitlines() if f"\t{email}\t" in line)
    assert row[2] == "free" and row[3] == "0"
    folders = lev("folder", "list", "--user", email)
    assert folders.returncode == 0 and folders.stdout.splitlines()[1].split("\t")[:3] == [folder, "Reading", "0"]
    assert lev("folder", "list", "--user", "nobody@example.com").returncode == 1


def test_every_cli_command_has_help() -> None:
    import argparse

    from lev.cli import build_parser

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        assert parser.description, f"`lev {' '.join(path)}` has no description"
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    assert choice.help, f"`lev {' '.join([*path, choice.dest])}` has no help line"
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif action.dest != "help":
                assert action.help, f"`lev {' '.join(path)}` {action.option_strings or action.dest} has no help"

    walk(build_parser(), [])
    r = lev("folder", "list", "--help")
    assert r.returncode == 0 and "--user EMAIL" in r.stdout


def test_readme_lists_every_setting() -> None:
    from lev.core.settings import Settings, settings_table

    readme = (ROOT / "README.md").read_text()
    start, end = "<!-- lev settings --markdown -->\n", "\n<!-- end lev settings -->"
    block = readme[readme.index(start) + len(start):readme.index(end)]
    assert block == settings_table(Settings(), markdown=True), "README is stale: paste `lev settings --markdown`"
    assert all(f.description for f in Settings.model_fields.values())
    r = lev("settings")
    assert r.returncode == 0 and "LEV_ALLOWED_ORIGINS=" in r.stdout and "LEV_TRUSTED_PROXIES=" in r.stdout
