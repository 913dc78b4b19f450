"""The `lev` command line: serve, worker, migrate, and user/token/folder/activity administration."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lev.store.db import Database
    from lev.store.objects import ObjectStore

# Each command imports what it runs when it runs: `lev token create` needs the store, not the web app or the model
# (the whole app is seconds of CPU to import).


def _die(message: str, code: int = 1) -> None:
    print(f"lev: {message}", file=sys.stderr)
    raise SystemExit(code)


async def _with_db(fn: Callable[[Any], Awaitable[Any]]) -> Any:
    from lev.core.settings import get_settings
    from lev.embedded import resolve_database_url
    from lev.store import db

    settings = get_settings()
    db_url = await asyncio.to_thread(resolve_database_url, settings.database_url, settings.data_dir)
    await asyncio.to_thread(db.migrate, db_url)
    database = db.init_engine(db_url, pool_size=2)
    try:
        async with database.transaction() as s:
            return await fn(s)
    finally:
        await db.dispose_engine()


def _run(fn: Callable[[Any], Awaitable[Any]]) -> Any:
    from lev.core.errors import ApiError

    try:
        return asyncio.run(_with_db(fn))
    except ApiError as err:
        extra = " ".join(f"{k}={v}" for k, v in err.extra.items())
        _die(f"{err.code}: {err.message or ''} {extra}".strip(), 2)


async def _user(s: Any, email: str) -> dict[str, Any]:
    from lev.store import users

    user = await users.by_email(s, email)
    if user is None:
        _die(f"no user with email {email}")
    assert user is not None
    return user


def _announce_auth_change() -> None:
    """After a committed revocation or credential change: running servers drop their cached principals (through
    their Redis; none running with the embedded one means none has a cache)."""
    from lev.auth.principal_cache import announce_change
    from lev.core.settings import get_settings
    from lev.embedded import running_redis_url

    settings = get_settings()
    url = settings.redis_url or running_redis_url(settings.data_dir)
    if url is not None:
        asyncio.run(announce_change(url))


def _read_password(args: argparse.Namespace) -> str | None:
    if not getattr(args, "password_stdin", False):
        return None
    pw = sys.stdin.readline().rstrip("\n")
    if not pw:
        _die("empty password on stdin")
    return pw


def cmd_user_create(args: argparse.Namespace) -> None:
    from lev.auth.accounts import create_user
    from lev.core.settings import get_settings
    from lev.limits.tiers import Tiers

    password = _read_password(args)
    if "@" not in args.email:
        _die("EMAIL must be an email address")
    print(_run(lambda s: create_user(s, args.email, args.tier, password)))
    if args.tier == "free" and Tiers.from_settings(get_settings()).token_cap("free") == 0:
        print(f"note: a free-tier user cannot mint tokens (LEV_TIER_FREE_TOKENS=0); "
              f"run `lev user set-tier {args.email} pro` (or create with --tier pro)", file=sys.stderr)


def cmd_user_list(_args: argparse.Namespace) -> None:
    from lev.store import users

    print("id\temail\ttier\tactive_tokens\tcreated_at")
    for r in _run(users.list_all):
        created = r["created_at"].isoformat() if r["created_at"] else "-"
        print(f"{r['id']}\t{r['email']}\t{r['tier']}\t{r['active_tokens']}\t{created}")


def cmd_user_set_password(args: argparse.Namespace) -> None:
    from lev.auth.passwords import PasswordChanged, set_password

    password = _read_password(args)
    assert password is not None

    async def go(s: Any) -> PasswordChanged:
        user = await _user(s, args.email)
        return await set_password(s, user["id"], password)

    changed: PasswordChanged = _run(go)
    _announce_auth_change()
    print(f"password changed; {changed.revoked_tokens} token(s) and grant(s) revoked, {changed.ended_sessions} "
          f"browser session(s) ended", file=sys.stderr)


def cmd_user_set_tier(args: argparse.Namespace) -> None:
    from lev.store import users

    async def go(s: Any) -> None:
        user = await _user(s, args.email)
        await users.set_tier(s, user["id"], args.tier)

    _run(go)
    _announce_auth_change()


def cmd_token_create(args: argparse.Namespace) -> None:
    from lev.auth.accounts import mint_token
    from lev.core.settings import get_settings

    expires_in_days = args.expires_in_days if args.expires_in_days is not None else get_settings().token_default_days
    try:
        folder_ids = [uuid.UUID(f) for f in args.folder]
    except ValueError:
        _die("--folder takes a folder id (UUID)")
        return

    async def go(s: Any) -> str:
        user = await _user(s, args.user)
        minted = await mint_token(s, get_settings(), user, name=args.name, write=args.write, folder_ids=folder_ids,
                                  kb_only=args.kb_only, expires_in_days=expires_in_days,
                                  write_cap=args.write_cap)
        return str(minted["token"])

    print(_run(go))


def cmd_token_list(args: argparse.Namespace) -> None:
    from lev.store import tokens

    async def go(s: Any) -> list[dict[str, Any]]:
        user = await _user(s, args.user)
        return await tokens.list_for_user(s, user["id"])

    rows = _run(go)
    print("id\tname\tprefix\tcapabilities\tscope\tkb_only\texpires_at\trevoked_at\tlast_used_at")
    for r in rows:
        scope = "all" if r["is_unscoped"] else ",".join(str(f) for f in (r["folder_ids"] or []))
        print("\t".join(str(x) for x in (
            r["id"], r["name"], r["prefix"] + "…", ",".join(r["capabilities"]), scope or "-", r["kb_only"],
            r["expires_at"].isoformat(), r["revoked_at"].isoformat() if r["revoked_at"] else "-",
            r["last_used_at"].isoformat() if r["last_used_at"] else "-",
        )))


def cmd_token_revoke(args: argparse.Namespace) -> None:
    from lev.store import tokens

    try:
        token_id = uuid.UUID(args.token_id)
    except ValueError:
        _die("TOKEN_ID must be a UUID (see `lev token list`)")
        return
    if not _run(lambda s: tokens.revoke_token(s, token_id)):
        _die("no active token with that id")
    _announce_auth_change()
    print("revoked", file=sys.stderr)


def cmd_folder_create(args: argparse.Namespace) -> None:
    from lev.library import reads as library

    async def go(s: Any) -> str:
        user = await _user(s, args.user)
        return (await library.create_folder(s, user["id"], args.name))["id"]

    print(_run(go))


def cmd_folder_list(args: argparse.Namespace) -> None:
    from lev.auth.policy import Scope
    from lev.store import folders

    async def go(s: Any) -> list[dict[str, Any]]:
        user = await _user(s, args.user)
        return await folders.list_visible(s, Scope(user["id"], None))

    print("id\tname\titem_count\tcreated_at")
    for f in _run(go):
        print(f"{f['id']}\t{f['name']}\t{f['item_count']}\t{f['created_at']}")


def cmd_settings(args: argparse.Namespace) -> None:
    from lev.core.settings import get_settings, settings_table

    print(settings_table(get_settings(), markdown=args.markdown))


def cmd_activity_clear(args: argparse.Namespace) -> None:
    from lev.store import activity

    async def go(s: Any) -> int:
        user = await _user(s, args.user)
        return await activity.clear_for_user(s, user["id"])

    print(f"{_run(go)} activity entries deleted", file=sys.stderr)


async def _with_url(fn: Callable[[Database, str], Awaitable[Any]]) -> Any:
    """Run `fn(database, database_url)` with the engine open and no migration (backup and restore leave the schema
    be; they need no Redis, so none is started and left running)."""
    from lev.core.settings import get_settings
    from lev.embedded import resolve_database_url
    from lev.store import db

    settings = get_settings()
    db_url = await asyncio.to_thread(resolve_database_url, settings.database_url, settings.data_dir)
    database = db.init_engine(db_url, pool_size=2)
    try:
        return await fn(database, db_url)
    finally:
        await db.dispose_engine()


def _with_backup(op: Callable[[Database, ObjectStore, Path, str], Awaitable[dict[str, Any]]],
                 path: str) -> dict[str, Any]:
    """Run `lev backup` or `lev restore` on `path`; a refusal is the command's error message."""
    from lev.ops.backup import BackupError
    from lev.runtime import get_object_store

    try:
        return asyncio.run(_with_url(lambda database, url: op(database, get_object_store(), Path(path), url)))
    except BackupError as exc:
        _die(str(exc))
        raise


def cmd_backup(args: argparse.Namespace) -> None:
    from lev.ops.backup import backup

    manifest = _with_backup(backup, args.path)
    objects = sum(o["bytes"] for o in manifest["objects"])
    print(f"backup written to {args.path}: database {manifest['database']['bytes']} bytes, "
          f"{len(manifest['objects'])} objects ({objects} bytes), {manifest['counts'].get('user_items', 0)} items",
          file=sys.stderr)
    if manifest["missing_objects"]:
        print(f"warning: {len(manifest['missing_objects'])} objects were deleted during the backup",
              file=sys.stderr)


def cmd_restore(args: argparse.Namespace) -> None:
    from lev.ops.backup import restore

    manifest = _with_backup(restore, args.path)
    _announce_auth_change()
    print(f"restored {args.path} (taken {manifest['created_at']}): {manifest['counts'].get('user_items', 0)} "
          f"items, {len(manifest['objects'])} objects", file=sys.stderr)


def cmd_db_upgrade(args: argparse.Namespace) -> None:
    """Move the embedded data directory to the newest PostgreSQL major the package ships, after a backup."""
    from lev.core.settings import get_settings
    from lev.embedded import DataDirBusy
    from lev.ops import pgupgrade
    from lev.ops.backup import backup
    from lev.store import db, maintenance

    settings = get_settings()
    if settings.database_url:
        _die("LEV_DATABASE_URL is set: `lev db upgrade` moves the embedded data directory only; upgrade that "
             "server with its own tools (pg_upgrade, or a dump and restore)")

    async def counts(database: Database, db_url: str) -> dict[str, int]:
        await asyncio.to_thread(db.migrate, db_url)
        return await maintenance.table_counts(database)

    try:
        pgupgrade.upgrade(settings.data_dir, Path(args.backup) if args.backup else None,
                          lambda path: _with_backup(backup, str(path)),
                          lambda: asyncio.run(_with_url(counts)), lambda line: print(line, file=sys.stderr))
    except (pgupgrade.UpgradeError, DataDirBusy) as exc:
        _die(str(exc))


def cmd_migrate(_args: argparse.Namespace) -> None:
    from lev.core.settings import get_settings
    from lev.embedded import resolve_database_url
    from lev.store import db

    settings = get_settings()
    newer = db.migrate(resolve_database_url(settings.database_url, settings.data_dir))
    if newer is not None:
        print(f"the database is at migration {newer}, newer than this release's {db.head_revision()}: "
              "nothing to apply", file=sys.stderr)
        return
    print("migrations applied", file=sys.stderr)


def cmd_serve(args: argparse.Namespace) -> None:
    from lev import serve
    from lev.embedded import DataDirBusy

    try:
        serve.serve(args.host, args.port, workers_inline=args.workers_inline)
    except DataDirBusy as busy:
        _die(str(busy))


def cmd_worker(_args: argparse.Namespace) -> None:
    from lev import serve

    serve.worker()


def build_parser() -> argparse.ArgumentParser:
    from lev.ops import pgupgrade

    p = argparse.ArgumentParser(
        prog="lev", description="Lev: a self-hostable knowledge base for AI agents (MCP and REST).",
        epilog="Settings are LEV_ environment variables (`lev settings` lists them). `lev COMMAND --help` for more.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(parent: Any, name: str, help_text: str) -> argparse.ArgumentParser:
        return parent.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")

    def group(name: str, help_text: str) -> Any:
        return command(sub, name, help_text).add_subparsers(dest="sub", required=True, metavar="SUBCOMMAND")

    sp = command(sub, "serve", "run the API and MCP endpoint (and, by default, the worker) on the embedded stack")
    sp.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sp.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    sp.add_argument("--workers-inline", action=argparse.BooleanOptionalAction, default=True,
                    help="run the job worker in this process (default on)")
    sp.set_defaults(fn=cmd_serve)
    command(sub, "worker", "run the background job worker").set_defaults(fn=cmd_worker)
    command(sub, "migrate", "apply database migrations").set_defaults(fn=cmd_migrate)
    b = command(sub, "backup", "write a consistent database dump, the stored objects and a manifest to PATH")
    b.add_argument("path", help="a new directory for the backup")
    b.set_defaults(fn=cmd_backup)
    b = command(sub, "restore", "restore a backup from PATH into an empty database and object store")
    b.add_argument("path", help="a directory written by `lev backup`")
    b.set_defaults(fn=cmd_restore)
    dbg = group("db", "the embedded database")
    d = command(dbg, "upgrade", f"move the embedded data directory to PostgreSQL {pgupgrade.target()} (pg_upgrade), "
                "after a backup; refused while Lev runs on it")
    d.add_argument("--backup", metavar="PATH", help="a new directory for the backup taken first (default: "
                   "LEV_DATA_DIR/backups/before-postgresql-N-TIME)")
    d.set_defaults(fn=cmd_db_upgrade)
    st = command(sub, "settings", "list every LEV_ setting with its value and default (secrets masked)")
    st.add_argument("--markdown", action="store_true", help="a Markdown table of names, defaults and meanings")
    st.set_defaults(fn=cmd_settings)

    user = group("user", "manage users")
    u = command(user, "create", "create a user; prints the user id")
    u.add_argument("email", help="the user's email address")
    u.add_argument("--tier", choices=["free", "pro"], default="free",
                   help="free (default; cannot mint tokens unless LEV_TIER_FREE_TOKENS allows) or pro")
    u.add_argument("--password-stdin", action="store_true", help="read a password for the web pages from stdin")
    u.set_defaults(fn=cmd_user_create)
    command(user, "list", "list users with their tier and active token count").set_defaults(fn=cmd_user_list)
    u = command(user, "set-password", "set a user's password from stdin (8 to 1000 characters); revokes all the "
                "user's tokens and grants and ends their browser sessions")
    u.add_argument("email", help="the user's email address")
    u.add_argument("--password-stdin", action="store_true", required=True, help="read the password from stdin")
    u.set_defaults(fn=cmd_user_set_password)
    u = command(user, "set-tier", "change a user's tier (pro lifts the token and transcription caps)")
    u.add_argument("email", help="the user's email address")
    u.add_argument("tier", choices=["free", "pro"], help="the new tier")
    u.set_defaults(fn=cmd_user_set_tier)

    token = group("token", "manage bearer tokens (lev_...) for agents and automations")
    t = command(token, "create", "mint a token; prints it alone on stdout (shown once)")
    t.add_argument("--user", required=True, metavar="EMAIL", help="the owner's email address")
    t.add_argument("--name", required=True, help="a name to recognise the token by")
    t.add_argument("--write", action="store_true", help="allow writes (read is always granted)")
    t.add_argument("--folder", action="append", default=[], metavar="FOLDER_ID",
                   help="limit the token to this folder (repeatable; default: the whole library)")
    t.add_argument("--no-kb-only", dest="kb_only", action="store_false",
                   help="also see items kept out of the knowledge base")
    t.add_argument("--expires-in-days", type=int, default=None,
                   help="lifetime in days (default LEV_TOKEN_DEFAULT_DAYS)")
    t.add_argument("--write-cap", type=int, default=None,
                   help="monthly writes allowed (default LEV_DEFAULT_WRITE_CAP; 0: no cap)")
    t.set_defaults(fn=cmd_token_create)
    t = command(token, "list", "list a user's tokens (never the secrets)")
    t.add_argument("--user", required=True, metavar="EMAIL", help="the owner's email address")
    t.set_defaults(fn=cmd_token_list)
    t = command(token, "revoke", "revoke a token by id")
    t.add_argument("token_id", help="the token's id (from `lev token list`)")
    t.set_defaults(fn=cmd_token_revoke)

    folder = group("folder", "manage folders")
    f = command(folder, "create", "create a folder; prints its id")
    f.add_argument("--user", required=True, metavar="EMAIL", help="the owner's email address")
    f.add_argument("name", help="the folder name (unique per user, case-insensitive)")
    f.set_defaults(fn=cmd_folder_create)
    f = command(folder, "list", "list a user's folders with their item counts")
    f.add_argument("--user", required=True, metavar="EMAIL", help="the owner's email address")
    f.set_defaults(fn=cmd_folder_list)

    act = group("activity", "manage activity logs")
    a = command(act, "clear", "delete a user's activity log")
    a.add_argument("--user", required=True, metavar="EMAIL", help="the owner's email address")
    a.set_defaults(fn=cmd_activity_clear)
    return p


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
