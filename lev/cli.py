"""The `lev` command line: serve, worker, migrate, and user/token/folder/activity administration."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from lev import library, logs, metrics
from lev.app import create_app
from lev.backup import BackupError, backup, restore
from lev.embedded import resolve_urls
from lev.errors import ApiError, email_taken
from lev.policy import mint_token
from lev.settings import get_settings
from store import activity, db, tokens, users
from tasks.worker import run_worker


def _die(message: str, code: int = 1) -> None:
    print(f"lev: {message}", file=sys.stderr)
    raise SystemExit(code)


async def _with_db(fn: Callable[[Any], Awaitable[Any]]) -> Any:
    settings = get_settings()
    db_url, _ = await asyncio.to_thread(resolve_urls, settings.database_url, settings.redis_url, settings.data_dir)
    await asyncio.to_thread(db.migrate, db_url)
    db.init_engine(db_url, pool_size=2)
    try:
        async with db.session_scope() as s:
            return await fn(s)
    finally:
        await db.dispose_engine()


def _run(fn: Callable[[Any], Awaitable[Any]]) -> Any:
    try:
        return asyncio.run(_with_db(fn))
    except ApiError as err:
        extra = " ".join(f"{k}={v}" for k, v in err.extra.items())
        _die(f"{err.code}: {err.message or ''} {extra}".strip(), 2)


async def _user(s: Any, email: str) -> dict[str, Any]:
    user = await users.by_email(s, email)
    if user is None:
        _die(f"no user with email {email}")
    assert user is not None
    return user


def _read_password(args: argparse.Namespace) -> str | None:
    if not getattr(args, "password_stdin", False):
        return None
    pw = sys.stdin.readline().rstrip("\n")
    if not pw:
        _die("empty password on stdin")
    return pw


def cmd_user_create(args: argparse.Namespace) -> None:
    password = _read_password(args)
    if "@" not in args.email:
        _die("EMAIL must be an email address")
    async def go(s: Any) -> uuid.UUID:
        created = await users.create(s, args.email, args.tier, password)
        if created is None:
            raise email_taken(args.email)
        return created

    print(_run(go))


def cmd_user_set_password(args: argparse.Namespace) -> None:
    password = _read_password(args)
    assert password is not None

    async def go(s: Any) -> int:
        user = await _user(s, args.email)
        await users.set_password(s, user["id"], password)
        return await tokens.revoke_all(s, user["id"])

    n = _run(go)
    print(f"password changed; {n} token(s) revoked", file=sys.stderr)


def cmd_user_set_tier(args: argparse.Namespace) -> None:
    async def go(s: Any) -> None:
        user = await _user(s, args.email)
        await users.set_tier(s, user["id"], args.tier)

    _run(go)


def cmd_token_create(args: argparse.Namespace) -> None:
    settings = get_settings()
    try:
        folder_ids = [uuid.UUID(f) for f in args.folder]
    except ValueError:
        _die("--folder takes a folder id (UUID)")
        return
    write_cap = settings.default_write_cap if args.write_cap is None else args.write_cap

    async def go(s: Any) -> str:
        user = await _user(s, args.user)
        token, _ = await mint_token(
            s, user, args.name, write=args.write, folder_ids=folder_ids, kb_only=args.kb_only,
            expires_in_days=args.expires_in_days, write_cap=write_cap,
            tier_caps={"free": settings.tier_free_tokens, "pro": settings.tier_pro_tokens},
        )
        return token

    print(_run(go))


def cmd_token_list(args: argparse.Namespace) -> None:
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
    try:
        token_id = uuid.UUID(args.token_id)
    except ValueError:
        _die("TOKEN_ID must be a UUID (see `lev token list`)")
        return
    if not _run(lambda s: tokens.revoke(s, token_id)):
        _die("no active token with that id")
    print("revoked", file=sys.stderr)


def cmd_folder_create(args: argparse.Namespace) -> None:
    async def go(s: Any) -> str:
        user = await _user(s, args.user)
        return (await library.create_folder(s, user["id"], args.name))["id"]

    print(_run(go))


def cmd_activity_clear(args: argparse.Namespace) -> None:
    async def go(s: Any) -> int:
        user = await _user(s, args.user)
        return await activity.clear_for_user(s, user["id"])

    print(f"{_run(go)} activity entries deleted", file=sys.stderr)


async def _with_url(fn: Callable[[str], Awaitable[Any]]) -> Any:
    """Run `fn(database_url)` with the engine open and no migration (backup and restore leave the schema be)."""

    settings = get_settings()
    db_url, _ = await asyncio.to_thread(resolve_urls, settings.database_url, settings.redis_url, settings.data_dir)
    db.init_engine(db_url, pool_size=2)
    try:
        return await fn(db_url)
    finally:
        await db.dispose_engine()


def cmd_backup(args: argparse.Namespace) -> None:
    from pathlib import Path


    try:
        manifest = asyncio.run(_with_url(lambda url: backup(Path(args.path), url)))
    except BackupError as exc:
        _die(str(exc))
        return
    objects = sum(o["bytes"] for o in manifest["objects"])
    print(f"backup written to {args.path}: database {manifest['database']['bytes']} bytes, "
          f"{len(manifest['objects'])} objects ({objects} bytes), {manifest['counts'].get('user_items', 0)} items",
          file=sys.stderr)
    if manifest["missing_objects"]:
        print(f"warning: {len(manifest['missing_objects'])} objects were deleted during the backup",
              file=sys.stderr)


def cmd_restore(args: argparse.Namespace) -> None:
    from pathlib import Path


    try:
        manifest = asyncio.run(_with_url(lambda url: restore(Path(args.path), url)))
    except BackupError as exc:
        _die(str(exc))
        return
    print(f"restored {args.path} (taken {manifest['created_at']}): {manifest['counts'].get('user_items', 0)} "
          f"items, {len(manifest['objects'])} objects", file=sys.stderr)


def cmd_migrate(_args: argparse.Namespace) -> None:
    async def go(_s: Any) -> None:
        return None

    _run(go)
    print("migrations applied", file=sys.stderr)


def cmd_serve(args: argparse.Namespace) -> None:
    import uvicorn


    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = get_settings()
    settings.workers_inline = args.workers_inline
    _setup_observability()
    # SIGTERM/SIGINT: uvicorn stops accepting, lets in-flight requests finish (bounded), then runs the lifespan
    # shutdown, which lets the inline worker's current jobs finish (bounded) and re-queues the rest.
    uvicorn.run(create_app(settings), host=args.host, port=args.port, lifespan="on", proxy_headers=False,
                log_config=None, access_log=False, timeout_graceful_shutdown=int(settings.shutdown_grace_sec))


def _setup_observability() -> None:
    settings = get_settings()
    logs.configure(settings.log_level, settings.log_format)
    metrics.configure(settings)


def cmd_worker(_args: argparse.Namespace) -> None:
    _setup_observability()
    run_worker()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lev", description="Lev knowledge base service")
    sub = p.add_subparsers(dest="command", required=True)

    sp = sub.add_parser("serve", help="run the API (and, by default, the worker) on the embedded stack")
    sp.add_argument("--host", default="127.0.0.1")
    sp.add_argument("--port", type=int, default=8080)
    sp.add_argument("--workers-inline", action=argparse.BooleanOptionalAction, default=True)
    sp.set_defaults(fn=cmd_serve)
    sub.add_parser("worker", help="run the background job worker").set_defaults(fn=cmd_worker)
    sub.add_parser("migrate", help="apply database migrations").set_defaults(fn=cmd_migrate)
    b = sub.add_parser("backup", help="write a consistent database dump, the stored objects and a manifest to PATH")
    b.add_argument("path")
    b.set_defaults(fn=cmd_backup)
    b = sub.add_parser("restore", help="restore a backup from PATH into an empty database and object store")
    b.add_argument("path")
    b.set_defaults(fn=cmd_restore)

    user = sub.add_parser("user").add_subparsers(dest="sub", required=True)
    u = user.add_parser("create", help="create a user; prints the user id")
    u.add_argument("email")
    u.add_argument("--tier", choices=["free", "pro"], default="free")
    u.add_argument("--password-stdin", action="store_true")
    u.set_defaults(fn=cmd_user_create)
    u = user.add_parser("set-password", help="set a password; revokes all the user's tokens")
    u.add_argument("email")
    u.add_argument("--password-stdin", action="store_true", required=True)
    u.set_defaults(fn=cmd_user_set_password)
    u = user.add_parser("set-tier")
    u.add_argument("email")
    u.add_argument("tier", choices=["free", "pro"])
    u.set_defaults(fn=cmd_user_set_tier)

    token = sub.add_parser("token").add_subparsers(dest="sub", required=True)
    t = token.add_parser("create", help="mint a token; prints it alone on stdout (shown once)")
    t.add_argument("--user", required=True)
    t.add_argument("--name", required=True)
    t.add_argument("--write", action="store_true")
    t.add_argument("--folder", action="append", default=[])
    t.add_argument("--no-kb-only", dest="kb_only", action="store_false")
    t.add_argument("--expires-in-days", type=int, default=get_settings().token_default_days)
    t.add_argument("--write-cap", type=int, default=None)
    t.set_defaults(fn=cmd_token_create)
    t = token.add_parser("list")
    t.add_argument("--user", required=True)
    t.set_defaults(fn=cmd_token_list)
    t = token.add_parser("revoke")
    t.add_argument("token_id")
    t.set_defaults(fn=cmd_token_revoke)

    folder = sub.add_parser("folder").add_subparsers(dest="sub", required=True)
    f = folder.add_parser("create", help="create a folder; prints its id")
    f.add_argument("--user", required=True)
    f.add_argument("name")
    f.set_defaults(fn=cmd_folder_create)

    act = sub.add_parser("activity").add_subparsers(dest="sub", required=True)
    a = act.add_parser("clear", help="delete a user's activity log")
    a.add_argument("--user", required=True)
    a.set_defaults(fn=cmd_activity_clear)
    return p


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
