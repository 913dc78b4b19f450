"""Following feeds (REST /api/v1/feeds and the folder page): follow a site or feed URL (the feed a page names is
found), list, rename, move, pause and resume, unfollow, "Refresh now", and OPML import and export.

Following fetches the feed once, in the request: what is not a feed is refused in words (400 not_a_feed) and
nothing is followed. The newest entries are recorded with the feed and ingested by the `poll_feed` job; a large
feed is only glanced at in the request (`parse.glance`) and read whole by that job (the feed shows `reading` until
then), so a follow answers in seconds whatever the feed's size.
Managing feeds takes a whole-library write token or the browser session; reads show the feeds of the folders in
the token's scope.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal, require, require_filer, require_whole_library
from lev.core import clock, weburl
from lev.core.errors import ApiError, found, invalid_body, limit_reached
from lev.feeds import opml, parse
from lev.feeds.poll import FIRST_FOLLOW_ENTRIES, POLL_JOB, next_poll, poll_job_id, record_new, status
from lev.net import share
from lev.plumbing import offload
from lev.plumbing.deps import Deps
from lev.plumbing.jobs import enqueue_job, requeue
from lev.store import feeds as feed_store
from lev.store import folders as folder_store
from lev.store import imports as import_store
from lev.store import members as member_store

OPML_CONCURRENCY = 8
MAX_URL_CHARS = 4096


def shape(feed: dict[str, Any]) -> dict[str, Any]:
    """A feed as the API shows it."""
    def when(value: Any) -> str | None:
        return value.isoformat() if value else None

    return {
        "id": str(feed["id"]), "url": feed["url"], "title": feed["title"] or feed["feed_title"],
        "site_url": feed["site_url"], "folder_id": str(feed["folder_id"]) if feed["folder_id"] else None,
        "status": status(feed), "last_checked_at": when(feed["last_checked_at"]), "last_error": feed["last_error"],
        "failures": feed["failures"], "next_check_at": None if feed["paused"] else when(feed["next_poll_at"]),
        "entries_ingested": feed["entries_ingested"], "created_at": when(feed["created_at"]),
        "reading": feed["last_success_at"] is None, "entries_found": feed["entries_found"],
        "entries_pending": feed.get("entries_pending", 0),
    }


def _manage(p: Principal) -> None:
    require(p, "write")
    require_whole_library(p, "manage feeds")


async def _check_folder(deps: Deps, p: Principal, folder_id: uuid.UUID | None) -> None:
    if folder_id is None:
        return
    async with deps.db.transaction() as s:
        require_filer(await member_store.role_of(s, p.user_id, folder_id), folder_id)


def _url(url: str) -> str:
    return weburl.http_url(url, "url", max_chars=MAX_URL_CHARS)


async def follow(deps: Deps, p: Principal, url: str, folder_id: uuid.UUID | None = None,
                 title: str | None = None) -> tuple[dict[str, Any], bool]:
    """Follow the feed at `url` (or the one its page names) into `folder_id`; (the feed, whether it is new). A
    feed the user follows already is answered as it is."""
    _manage(p)
    url = _url(url)
    with share.on_behalf_of(p.user_id):
        return await _follow(deps, p, url, folder_id, title)


async def _follow(deps: Deps, p: Principal, url: str, folder_id: uuid.UUID | None,
                  title: str | None) -> tuple[dict[str, Any], bool]:
    await _check_folder(deps, p, folder_id)
    cap = deps.settings.feed_max_per_user
    async with deps.db.transaction() as s:
        existing = await feed_store.by_url(s, p.user_id, [url])
        used = await feed_store.count_for_user(s, p.user_id)
    if existing is not None:
        return shape(existing), False
    if used >= cap:
        raise limit_reached(f"You follow {used} feeds, the most one account may follow ({cap}); unfollow one "
                            "first.", cap=cap, used=used)
    fetched, reading = await parse.discover(deps.outbound, url)
    feed = reading.feed
    assert feed is not None
    whole = not reading.partial  # a large feed's entries are read by the poll job, its validators kept till then
    async with deps.db.transaction() as s:
        await feed_store.lock_user(s, p.user_id)
        existing = await feed_store.by_url(s, p.user_id, [url, fetched.url])
        if existing is not None:
            return shape(existing), False
        used = await feed_store.count_for_user(s, p.user_id)
        if used >= cap:
            raise limit_reached(f"You follow {used} feeds, the most one account may follow ({cap}); unfollow one "
                                "first.", cap=cap, used=used)
        if folder_id is not None:  # a shared folder: its owner's or an editor's feed only
            require_filer(await member_store.role_of(s, p.user_id, folder_id, lock=True), folder_id)
        now = clock.now()
        row = await feed_store.create(
            s, user_id=p.user_id, folder_id=folder_id, url=fetched.url, site_url=feed.site_url,
            title=(title or "").strip()[:500] or None, feed_title=feed.title,
            etag=fetched.etag if whole else None, last_modified=fetched.last_modified if whole else None,
            body_sha256=fetched.sha256 if whole else None, last_checked_at=now if whole else None,
            last_success_at=now if whole else None, next_poll_at=next_poll(deps.settings, 0) if whole else now)
        if row is None:  # a concurrent follow of the same feed won
            existing = await feed_store.by_url(s, p.user_id, [fetched.url])
            assert existing is not None
            return shape(existing), False
        pending = 0
        if whole:
            pending = await record_new(s, p.user_id, row["id"], feed,
                                       min(FIRST_FOLLOW_ENTRIES, deps.settings.feed_max_entries))
            row = await feed_store.shown(s, row["id"])
    if pending or not whole:
        await enqueue_job(deps.queue, POLL_JOB, str(row["id"]), job_id=poll_job_id(row["id"]))
    return shape(row), True


async def list_feeds(deps: Deps, p: Principal, folder_id: uuid.UUID | None = None) -> list[dict[str, Any]]:
    async with deps.db.read_session() as s:
        return [shape(f) for f in await feed_store.list_visible(s, p.scope, folder_id)]


async def get(deps: Deps, p: Principal, feed_id: uuid.UUID) -> dict[str, Any]:
    async with deps.db.read_session() as s:
        return shape(found(await feed_store.get_visible(s, p.scope, feed_id)))


async def _locked(s: AsyncSession, p: Principal, feed_id: uuid.UUID) -> dict[str, Any]:
    """The caller's feed, locked for a change (404 when they cannot see it)."""
    return found(await feed_store.get_visible(s, p.scope, feed_id, lock=True))


async def update(deps: Deps, p: Principal, feed_id: uuid.UUID, body: dict[str, Any]) -> dict[str, Any]:
    """Rename (`title`, null for the feed's own), move (`folder_id`, null for unfiled), pause or resume."""
    _manage(p)
    values: dict[str, Any] = {}
    if "title" in body:
        values["title"] = (body["title"] or "").strip()[:500] or None
    async with deps.db.transaction() as s:
        row = await _locked(s, p, feed_id)
        if "folder_id" in body:
            folder = uuid.UUID(body["folder_id"]) if body["folder_id"] else None
            if folder is not None:
                require_filer(await member_store.role_of(s, p.user_id, folder, lock=True), folder)
            values["folder_id"] = folder
        if "paused" in body and bool(body["paused"]) != row["paused"]:
            values["paused"] = bool(body["paused"])
            if not values["paused"]:  # resumed: checked at once
                values["next_poll_at"] = clock.now()
        row = await feed_store.update_feed(s, feed_id, **values) if values else row
    if values.get("paused") is False:
        await requeue(deps.queue, POLL_JOB, str(feed_id), job_id=poll_job_id(feed_id))
    return shape(row)


async def unfollow(deps: Deps, p: Principal, feed_id: uuid.UUID) -> dict[str, Any]:
    """Stop following; the items it brought stay."""
    _manage(p)
    async with deps.db.transaction() as s:
        await _locked(s, p, feed_id)
        await feed_store.delete_feed(s, feed_id)
    return {"id": str(feed_id), "deleted": True}


async def refresh(deps: Deps, p: Principal, feed_id: uuid.UUID) -> dict[str, Any]:
    """Check the feed now (a paused feed is resumed by PATCH paused: false, not by a refresh)."""
    _manage(p)
    async with deps.db.transaction() as s:
        if (await _locked(s, p, feed_id))["paused"]:
            raise invalid_body("This feed is paused: resume it (PATCH paused: false) to check it.")
        row = await feed_store.update_feed(s, feed_id, next_poll_at=clock.now())
    await requeue(deps.queue, POLL_JOB, str(feed_id), job_id=poll_job_id(feed_id))
    return shape(row)


async def export_opml(deps: Deps, p: Principal) -> bytes:
    async with deps.db.read_snapshot() as s:
        found = [shape(f) for f in await feed_store.list_visible(s, p.scope)]
        names = {f["id"]: f["name"] for f in await folder_store.list_visible(s, p.scope)}
    return opml.render(found, names)


async def import_opml(deps: Deps, p: Principal, data: bytes) -> dict[str, Any]:
    """Follow every feed an OPML file lists (a few at a time), into folders named after its outlines."""
    _manage(p)
    try:
        outlines = await offload.run(opml.parse, data, size=len(data))
    except offload.OffloadFailed:
        raise invalid_body("The OPML file could not be read (its reader stopped).") from None
    names = list(dict.fromkeys(o.folder for o in outlines if o.folder))
    async with deps.db.transaction() as s:
        folder_ids, _ = await import_store.ensure_folders(s, p.user_id, names)
    gate = asyncio.Semaphore(OPML_CONCURRENCY)
    added: list[dict[str, Any]] = []
    already: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []

    async def one(o: opml.Outline, late: list[opml.Outline]) -> None:
        async with gate:
            try:
                feed, new = await follow(deps, p, o.url, folder_ids.get((o.folder or "").lower()), o.title)
            except ApiError as exc:
                if exc.status >= 500:
                    raise
                refused.append({"line": o.line, "url": o.url, "error": exc.message or exc.code})
                late.remove(o)
                return
            late.remove(o)
            (added if new else already).append(feed)

    first: dict[str, opml.Outline] = {}
    for outline in outlines:  # a feed listed twice is followed where it is listed first
        first.setdefault(outline.url.strip(), outline)
    late = list(first.values())  # each leaves once its follow has an answer
    deadline = deps.settings.opml_deadline_sec
    with share.on_behalf_of(p.user_id):  # the follows' fetches take this user's share, not everyone's
        try:
            async with asyncio.timeout(deadline), asyncio.TaskGroup() as group:
                for outline in first.values():
                    group.create_task(one(outline, late))
        except TimeoutError:
            pass
    for o in late:
        refused.append({"line": o.line, "url": o.url, "error": f"not checked: the import's {deadline:g} s "
                        "were up before this feed's turn ended; import the file again to follow the rest"})
    already.extend({} for _ in range(len(outlines) - len(first)))
    refused.sort(key=lambda r: r["line"])
    return {"added": len(added), "already_followed": len(already), "refused": len(refused),
            "refusals": refused, "feeds": sorted(added, key=lambda f: f["url"])}
