"""Polling a feed (the `poll_feed` job): a conditional GET through the guard, the new entries recorded `pending` in
the same transaction as the validators and the feed's health, then each pending entry ingested like any link.

Durable like imports: the entries in PostgreSQL are the record of promised work, so a crash mid-poll loses
nothing (the schedule finds the pending entries and polls again) and adds nothing twice (an entry whose link the
user already has is only filed). One poll of a feed runs at a time (an advisory lock). A feed that keeps failing
is marked failing after three checks in a row and checked less often (doubled per failure, up to a day).
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import random
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal, filing_target
from lev.core import clock
from lev.core.errors import ApiError, infrastructure_error
from lev.core.settings import Settings
from lev.feeds import parse
from lev.feeds.parse import Feed
from lev.imports.importfile import dedupe_key
from lev.ingest.request import IngestRequest
from lev.ingest.save import Stored, save_failed
from lev.ingest.service import ingest
from lev.ingest.urls import classify_media_url
from lev.net import share
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.plumbing.jobs import job_id
from lev.store import feeds as feed_store
from lev.store import imports as import_store
from lev.store import users as user_store
from lev.webhooks import events

log = logs.get_logger("lev.feeds")

POLL_JOB = "poll_feed"
FAILING_AFTER = 3  # checks failed in a row before a feed shows as failing (feed.failing is told then)
MAX_BACKOFF = timedelta(hours=24)
FIRST_FOLLOW_ENTRIES = 20  # a first reading takes the newest entries (at most LEV_FEED_MAX_ENTRIES), not the archive
ENTRY_TIMEOUT_SEC = 360.0  # one entry: a page fetch, or a podcast episode's download of up to 300 s
CHECK_DEADLINE_SEC = 300.0  # one check in all: the fetch (30 s at most) and reading what came in a child process


def poll_job_id(feed_id: uuid.UUID | str) -> str:
    return job_id(POLL_JOB, feed_id)


def lock_key(feed_id: uuid.UUID) -> int:
    return int.from_bytes(hashlib.sha256(b"lev-feed:" + feed_id.bytes).digest()[:8], "big", signed=True)


def next_poll(settings: Settings, failures: int) -> datetime:
    """When to check again: every LEV_FEED_POLL_MINUTES, doubled per failure in a row up to a day, give or take
    a tenth (a thousand feeds followed at once do not all come due in the same minute)."""
    delay = timedelta(minutes=settings.feed_poll_minutes * 2 ** min(failures, 10))
    if failures:
        delay = min(delay, MAX_BACKOFF)
    return clock.now() + delay * random.uniform(0.9, 1.1)


def status(feed: dict[str, Any]) -> str:
    if feed["paused"]:
        return "paused"
    return "failing" if feed["failures"] >= FAILING_AFTER else "active"


async def record_new(s: AsyncSession, user_id: uuid.UUID, feed_id: uuid.UUID, feed: Feed, limit: int) -> int:
    """Record the entries the user's feeds have not seen: the newest `limit` pending, older ones skipped (seen, so
    never ingested later). Returns how many are pending."""
    seen_guids, seen_urls = await feed_store.seen(s, user_id, [e.guid_key for e in feed.entries],
                                                  [e.url_key for e in feed.entries if e.url_key is not None])
    rows: list[dict[str, Any]] = []
    pending = 0
    for n, entry in enumerate(feed.entries):  # newest first
        if n and not n % 1000:
            await asyncio.sleep(0)  # a 20,000-entry feed: the event loop gets a turn now and then
        guid_key, url_key = entry.guid_key, entry.url_key
        if guid_key in seen_guids or (url_key is not None and url_key in seen_urls):
            continue
        seen_guids.add(guid_key)
        if url_key is not None:
            seen_urls.add(url_key)
        promised = entry.url is not None and pending < limit
        pending += promised
        rows.append({"guid_key": guid_key, "url_key": url_key, "url": entry.url, "title": entry.title,
                     "published_at": entry.published, "status": "pending" if promised else "skipped",
                     "error": None if entry.url else "the entry has no http(s) link",
                     "content": entry.content if promised else None})
    await feed_store.record_entries(s, user_id, feed_id, rows)
    return pending


async def poll(deps: Deps, feed_id: uuid.UUID) -> int:
    """One run of the job: check the feed when it is due, then ingest its pending entries (at most
    LEV_FEED_MAX_ENTRIES). Returns the items the feed brought."""
    async with deps.db.try_advisory_lock(lock_key(feed_id)) as held:
        if not held:
            return 0  # another run polls it now
        async with deps.db.transaction() as s:
            feed = await feed_store.row(s, feed_id)
            user = await user_store.by_id(s, feed["user_id"]) if feed else None
        if feed is None or user is None or feed["paused"]:
            return 0
        with share.on_behalf_of(feed["user_id"]):
            if feed["next_poll_at"] <= clock.now():
                await check(deps, feed)
            return await ingest_pending(deps, feed, user["tier"])


async def check(deps: Deps, feed: dict[str, Any]) -> None:
    """Fetch the feed (conditional GET), read it in a child process, and record what it says in one transaction.
    A statement that fails (anything but an outage of the database) fails the check with the reason."""
    error: str | None = None
    parsed: Feed | None = None
    values: dict[str, Any] = {}
    try:
        async with asyncio.timeout(CHECK_DEADLINE_SEC):
            fetched = await parse.fetch(deps.outbound, feed["url"], feed["etag"], feed["last_modified"])
            if unchanged(feed, fetched):
                values = {"etag": fetched.etag or feed["etag"], "last_modified": fetched.last_modified or
                          feed["last_modified"]}
            else:
                parsed, values, error = await read_changed(feed, fetched)
    except TimeoutError:
        error, parsed, values = f"the check took longer than {CHECK_DEADLINE_SEC:g} s", None, {}
    except ApiError as exc:
        if infrastructure_error(exc) is not None:
            raise
        error = exc.message or exc.code
    try:
        await record_check(deps, feed, parsed, values, error)
    except Exception as exc:
        if infrastructure_error(exc) is not None:
            raise  # a real outage: the job is retried once the database answers
        log.exception("recording a feed check failed", feed_id=str(feed["id"]))
        error = f"the feed's entries could not be recorded ({type(exc).__name__}); it is checked again later"
        await record_check(deps, feed, None, {}, error)


def unchanged(feed: dict[str, Any], fetched: parse.Fetched) -> bool:
    """Nothing new: 304 to the validators sent, or 200 with the very body of the last 200."""
    return fetched.status == 304 or (feed["body_sha256"] is not None and fetched.sha256 == feed["body_sha256"])


async def read_changed(feed: dict[str, Any], fetched: parse.Fetched) -> tuple[Feed | None, dict[str, Any], str | None]:
    """A changed answer read in a child process: (the feed, the values its check records, or the error)."""
    found = await parse.read(fetched)
    if found.feed is None:
        return None, {}, f"the feed is no longer a feed: {found.why_not}"
    return found.feed, {"etag": fetched.etag, "last_modified": fetched.last_modified, "body_sha256": fetched.sha256,
                        "feed_title": found.feed.title, "site_url": found.feed.site_url or feed["site_url"]}, None


async def record_check(deps: Deps, feed: dict[str, Any], parsed: Feed | None, values: dict[str, Any],
                        error: str | None) -> int:
    """Record a check (the new entries of `parsed` pending, the feed's health); how many entries it made pending."""
    failures = 0 if error is None else int(feed["failures"]) + 1
    pending = 0
    async with deps.db.transaction() as s:
        if not await feed_store.lock(s, feed["id"]):
            return 0  # unfollowed while it was checked
        if parsed is not None:
            limit = deps.settings.feed_max_entries
            if feed["last_success_at"] is None:  # the first reading of a feed followed before it was read whole
                limit = min(FIRST_FOLLOW_ENTRIES, limit)
            pending = await record_new(s, feed["user_id"], feed["id"], parsed, limit)
        now_failing = await feed_store.checked(s, feed["id"], error=error, next_poll_at=next_poll(deps.settings,
                                                                                                  failures),
                                               **values)
        if error is not None and now_failing == FAILING_AFTER:
            await events.record(s, feed["user_id"], "feed.failing", {
                "feed_id": str(feed["id"]), "url": feed["url"], "title": feed["title"] or feed["feed_title"],
                "folder_id": str(feed["folder_id"]) if feed["folder_id"] else None, "last_error": error,
                "failures": now_failing})
    if error is not None:
        log.info("feed check failed", feed_id=str(feed["id"]), failures=failures)
    return pending


async def ingest_pending(deps: Deps, feed: dict[str, Any], tier: str) -> int:
    async with deps.db.transaction() as s:
        todo = await feed_store.pending(s, feed["id"], deps.settings.feed_max_entries)
    principal = Principal(token_id=None, user_id=feed["user_id"], name="feed",
                          capabilities=frozenset({"read", "write"}), is_unscoped=True, folder_ids=frozenset(),
                          kb_only=False, write_cap=0, tier=tier)
    brought = 0
    for entry in todo:
        brought += await _run_entry(deps, principal, feed, entry)
    return brought


async def _run_entry(deps: Deps, principal: Principal, feed: dict[str, Any], entry: dict[str, Any]) -> int:
    """Ingest one entry (unless its feed was unfollowed meanwhile); anything but an outage of the database or Redis
    ends as the entry's failure."""
    async with deps.db.read_session() as s:
        if not await feed_store.still_pending(s, entry["id"]):
            return 0
    try:
        async with asyncio.timeout(ENTRY_TIMEOUT_SEC):
            return await _ingest_entry(deps, principal, feed, entry)
    except Exception as exc:
        if infrastructure_error(exc) is not None:
            raise  # the job is retried; the entry is still pending
        reason = (f"gave up after {int(ENTRY_TIMEOUT_SEC)} s" if isinstance(exc, TimeoutError)
                  else f"unexpected error: {type(exc).__name__}: {exc}")
        await _fail(deps, principal, feed, entry, reason)
        return 0


async def _existing(deps: Deps, user_id: uuid.UUID, url: str) -> dict[str, Any] | None:
    key = dedupe_key(url)
    async with deps.db.transaction() as s:
        return await import_store.existing_by_url(s, user_id, [url, key], [key])


async def _finish(deps: Deps, feed: dict[str, Any], entry: dict[str, Any], item_id: uuid.UUID | None, *, brought: bool,
                  error: str | None = None) -> int:
    async with deps.db.transaction() as s:
        await feed_store.finish_entry(s, entry, status="failed" if error else "done", item_id=item_id, error=error,
                                      brought=brought, folder_id=feed["folder_id"])
    return int(brought)


async def _ingest_entry(deps: Deps, principal: Principal, feed: dict[str, Any], entry: dict[str, Any]) -> int:
    url = entry["url"]
    found = await _existing(deps, principal.user_id, url)
    if found is not None:  # the user has it (or an earlier run of this poll stored it): only file it
        return await _finish(deps, feed, entry, found["id"], brought=found["created_at"] >= entry["created_at"])
    request = IngestRequest("url", url=url, title=entry["title"], in_kb=True, auto_transform=False,
                            folder_id=feed["folder_id"])
    try:
        try:
            stored = await _ingest_filed(deps, principal, request)
        except ApiError as exc:
            own = _from_content(entry)
            if exc.code != "ingest_failed" or own is None:
                raise
            stored = await _ingest_filed(deps, principal, replace(request, kind="page", html=own,
                                                                             captured="feed"))
    except ApiError as exc:
        if infrastructure_error(exc) is not None:
            raise
        await _fail(deps, principal, feed, entry, exc.message or exc.code)
        return 0
    return await _finish(deps, feed, entry, stored.item_id, brought=True)


async def _ingest_filed(deps: Deps, principal: Principal, request: IngestRequest) -> Stored:
    try:
        return await ingest(deps, principal, request)
    except ApiError as exc:
        if exc.code != "folder_not_found":
            raise
        return await ingest(deps, principal, replace(request, folder_id=None))  # the folder went away


def _from_content(entry: dict[str, Any]) -> str | None:
    """The entry's own text as a page to store when its page could not be read (no readable text, a dead link): a
    short post, a toot, a changelog line. Not for an audio or video enclosure (its show notes are not the episode)."""
    content = entry.get("content")
    if not content or classify_media_url(entry["url"]) is not None:
        return None
    title = html.escape(entry["title"] or "")
    return f"<!doctype html><html><head><title>{title}</title></head><body><article>{content}</article></body></html>"


async def _fail(deps: Deps, principal: Principal, feed: dict[str, Any], entry: dict[str, Any], reason: str) -> None:
    """A failed entry becomes a failed item saying why, filed like the rest (as an import's dead link does)."""
    found = await _existing(deps, principal.user_id, entry["url"])
    if found is not None:
        await _finish(deps, feed, entry, found["id"], brought=found["created_at"] >= entry["created_at"], error=reason)
        return
    try:
        item_id = await save_failed(deps, filing_target(principal, feed["folder_id"]),
                                     kind=classify_media_url(entry["url"]) or "url", url=entry["url"],
                                     title=entry["title"], error=reason, in_kb=True)
    except ApiError:  # the folder went away meanwhile: the entry fails without an item
        await _finish(deps, feed, entry, None, brought=False, error=reason)
        return
    await _finish(deps, feed, entry, item_id, brought=False, error=reason)
