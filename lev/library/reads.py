"""Read operations shared by the REST and MCP surfaces, the pages and the CLI: search, an item, its stored file,
recent items, similar items; and the folder writes they share."""

from __future__ import annotations

import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal, folder_name, folder_visible, require_owner, require_whole_library
from lev.core import context
from lev.core.errors import invalid_body, name_taken, not_found
from lev.core.settings import Settings
from lev.highlights import found
from lev.ingest import progress
from lev.plumbing.deps import Deps
from lev.store import folders as folder_store
from lev.store import highlight_search, lifecycle
from lev.store import highlights as highlight_store
from lev.store import items as item_store
from lev.store import members as member_store
from lev.store import search as search_store
from lev.store import similar as similar_store
from lev.store import sourcefiles as source_store
from lev.store import tags as tag_store
from lev.store.filters import NONE as NO_FILTERS
from lev.store.filters import Filters
from lev.store.scope import Scope

MAX_LIMIT = 50  # results of a search (REST and MCP) and of similar items


def search_params(s: Settings) -> search_store.SearchParams:
    return search_store.SearchParams(candidates=s.search_candidates, semantic_weight=s.search_semantic_weight,
                                     k1=s.search_bm25_k1, b=s.search_bm25_b, prune_df=s.search_bm25_prune_df,
                                     ef_search=s.hnsw_ef_search, exact_scan_max_chunks=s.search_exact_scan_max_chunks)


async def search(deps: Deps, principal: Principal, *, query: str, mode: str = "hybrid", limit: int = 10,
                 filters: Filters = NO_FILTERS) -> dict[str, Any]:
    """Top chunks for `query` within the token's scope, narrowed by `filters` (a folder or an item in the scope,
    kinds, a site, a saved-at window); a folder or item outside the scope is 404."""
    query = (query or "").strip()
    if not query:
        raise invalid_body("The search query must not be empty.")
    if "\x00" in query:  # PostgreSQL text cannot hold NUL
        raise invalid_body("The search query must not contain NUL characters.")
    if mode not in search_store.MODES:
        raise invalid_body("mode must be hybrid, semantic or keyword.")
    if not 1 <= limit <= MAX_LIMIT:
        raise invalid_body(f"limit must be between 1 and {MAX_LIMIT}.")
    folder_id, item_id = filters.folder_id, filters.item_id
    if folder_id is not None and not folder_visible(principal.scope, folder_id):
        raise not_found()
    # The query is embedded in a worker thread while the database plans and finds keyword candidates.
    vector = deps.queries.submit(query) if mode != "keyword" else None
    try:
        async with deps.db.read_session() as s:  # reads only: no BEGIN and COMMIT round trips
            if folder_id is not None and not await member_store.role_of(s, principal.user_id, folder_id):
                raise not_found()
            if item_id is not None and not await item_store.is_visible(s, principal.scope, item_id):
                raise not_found()
            params = search_params(deps.settings)
            results = await search_store.search(s, principal.scope, query=query, query_vector=vector, mode=mode,
                                                limit=limit, filters=filters, params=params)
            marked = await highlight_search.candidates(
                s, principal.scope, query=query, query_vector=await vector if vector is not None else None,
                mode=mode, limit=limit, k1=params.k1, b=params.b, filters=filters)
            results = found.merge(results, marked, mode, limit, params.semantic_weight)
            tags = await tag_store.names_of(s, sorted({uuid.UUID(r["item_id"]) for r in results}))
    finally:
        if vector is not None:
            if not vector.done():
                vector.cancel()
            elif not vector.cancelled():
                vector.exception()  # mark it retrieved: an error raised above takes precedence
    context.note_results(len(results), query)
    return {"mode": mode, "results": [{**located_hit(r), "tags": tags.get(uuid.UUID(r["item_id"]), [])}
                                      for r in results]}


def located_hit(hit: dict[str, Any]) -> dict[str, Any]:
    """A search hit as the contract shows it: its item's kind and saved date, and its location (characters of the
    item's text, or of its transcript for a recording; the pages of a PDF; the slide of a presentation; the sheet and
    rows of a spreadsheet; the heading above it). A transcript
    chunk (audio, video, YouTube) also carries `start_sec` and `end_sec`, beside the location and in it, and its
    `url` opens that moment."""
    kind, stored = hit["kind"], hit.pop("stored_media", False)
    start, end = hit.pop("start_sec", None), hit.pop("end_sec", None)
    raw = hit.pop("location")
    where: dict[str, Any] = {"char_start": raw["char_start"], "char_end": raw["char_end"]}
    if kind == "pdf":
        where["page"], where["page_end"] = raw["page"], raw["page_end"]
    if kind == "presentation":
        where["slide"] = raw.get("slide")
    if kind == "spreadsheet":
        where.update({k: raw.get(k) for k in ("sheet", "row_start", "row_end")})
    if start is not None and kind in lifecycle.MEDIA_KINDS:
        hit["start_sec"], hit["end_sec"] = round(start, 3), round(end if end is not None else start, 3)
        where["start_sec"], where["end_sec"] = hit["start_sec"], hit["end_sec"]
        hit["url"] = moment_url(kind, hit["url"], hit["item_id"], start, stored=stored)
    where["heading"] = raw["heading"]
    hit["location"] = where
    return hit


def moment_url(kind: str, url: str | None, item_id: str, start: float, *, stored: bool) -> str | None:
    """The URL that opens a recording at `start` seconds: YouTube's `t=` parameter on the video's URL, a media
    fragment (`#t=`) on Lev's copy of stored audio or video (GET /api/v1/items/{id}/media)."""
    second = int(start)
    if kind == "youtube" and url:
        return f"{url}{'&' if '?' in url else '?'}t={second}s"
    if stored:
        return f"{context.base_url()}/api/v1/items/{item_id}/media#t={second}"
    return f"{url.split('#', 1)[0]}#t={second}" if url else None


async def create_folder(session: AsyncSession, user_id: uuid.UUID, name: str) -> dict[str, Any]:
    """A new folder for the REST handler and the CLI: 400 for a bad name, 409 name_taken for a used one."""
    clean = folder_name(name)
    created = await folder_store.create_folder(session, user_id, clean)
    if created is None:
        raise name_taken(f"A folder named {clean!r} already exists.")
    return created


async def rename_folder(session: AsyncSession, scope: Scope, folder_id: uuid.UUID, name: str) -> dict[str, Any]:
    """Rename one of the user's folders: 400 for a bad name, 404 for no such folder, 403 for a folder shared with
    the user (the owner names it), 409 name_taken."""
    clean = folder_name(name)
    require_owner(await member_store.role_of(session, scope.user_id, folder_id, lock=True), "rename it")
    renamed = await folder_store.rename_folder(session, scope, folder_id, clean)
    if renamed is None:
        raise name_taken(f"A folder named {clean!r} already exists.")
    return renamed


MAX_PAGE_CHARS = 100_000


async def get_item(deps: Deps, principal: Principal, item_id: uuid.UUID) -> dict[str, Any]:
    """The whole item (`page` cuts its text into pages); 404 when the caller cannot see it."""
    async with deps.db.read_session() as s:
        item = await item_store.get_visible(s, principal.scope, item_id)
        if item is not None:
            item["highlights"] = await highlight_store.of_item(s, principal.user_id, item_id)
    if item is None:
        raise not_found()
    context.note_results(1)
    moving = lifecycle.of_row(item["status"], item["transcription_status"]).moving
    item["processing"] = await progress.read(deps.redis, uuid.UUID(str(item["content_id"]))) if moving else None
    return item


def check_page(offset: int, max_chars: int | None) -> None:
    """400 invalid_body for a page outside the bounds (offset >= 0, max_chars 1-100,000)."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise invalid_body("offset must be an integer of at least 0.", parameter="offset")
    if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int)
                                  or not 1 <= max_chars <= MAX_PAGE_CHARS):
        raise invalid_body(f"max_chars must be an integer from 1 to {MAX_PAGE_CHARS:,}.", parameter="max_chars")


def page(item: dict[str, Any], offset: int = 0, max_chars: int | None = None) -> dict[str, Any]:
    """The item with characters [offset, offset + max_chars) of its text and of its transcript (all of them from
    `offset` without `max_chars`), where the page starts, how long each whole is, and where the next page starts
    (`next_offset`, null at the end). Characters are Unicode code points, as search locations count them."""
    check_page(offset, max_chars)
    text, transcript = item.get("text"), item.get("transcript")
    longest = max(len(text or ""), len(transcript or ""))
    end = longest if max_chars is None else offset + max_chars
    return {**item, "text": None if text is None else text[offset:end],
            "transcript": None if transcript is None else transcript[offset:end],
            "text_offset": offset, "text_total_chars": len(text or ""),
            "transcript_total_chars": len(transcript or ""), "next_offset": end if end < longest else None}


async def stored_file(deps: Deps, principal: Principal, item_id: uuid.UUID) -> tuple[Path | str, str, str]:
    """Where the caller reads a visible item's stored file (a local path or a presigned URL), its MIME type and
    file name; 404 when the item is not visible or has no stored file."""
    async with deps.db.read_session() as s:
        row = await item_store.stored_object(s, principal.scope, item_id)
    if row is None:
        raise not_found("The item does not exist, is outside this token's scope, or has no stored file.")
    context.note_results(1)
    mime = row["mime"] or "application/octet-stream"
    where = deps.objects.read_location(row["object_path"], mime)
    return where, mime, PurePosixPath(row["object_path"]).name


async def stored_file_name(deps: Deps, principal: Principal, item_id: uuid.UUID) -> str | None:
    """The name of a visible item's stored file (what `stored_file` serves), or None when it has none."""
    async with deps.db.read_session() as s:
        row = await item_store.stored_object(s, principal.scope, item_id)
    return PurePosixPath(row["object_path"]).name if row else None


async def list_recent(deps: Deps, principal: Principal, limit: int) -> list[dict[str, Any]]:
    async with deps.db.read_session() as s:
        items = await item_store.recent(s, principal.scope, limit)
    context.note_results(len(items))
    return items


async def similar_items(deps: Deps, principal: Principal, item_id: uuid.UUID, limit: int = 10) -> dict[str, Any]:
    """Visible in-KB items ranked by how near their chunks lie to the item's chunks (search's scope rules)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise invalid_body(f"limit must be between 1 and {MAX_LIMIT}.")
    async with deps.db.read_session() as s:
        results = await similar_store.similar_items(s, principal.scope, item_id, limit=limit,
                                                    params=search_params(deps.settings))
    if results is None:
        raise not_found()
    context.note_results(len(results))
    return {"item_id": str(item_id), "results": results}


MAX_SOURCE_FILES = 1000  # a page of GET /api/v1/source-files


async def source_files(deps: Deps, principal: Principal, prefix: str, after: str | None,
                       limit: int) -> dict[str, Any]:
    """The files the caller's library keeps by their path (`lev sync` compares them with a folder), those under
    `prefix`, in byte order of their paths, a page of `limit` after `after`; a whole-library token's."""
    require_whole_library(principal, "list the files kept by their path")
    if not 1 <= limit <= MAX_SOURCE_FILES:
        raise invalid_body(f"limit must be between 1 and {MAX_SOURCE_FILES}.")
    async with deps.db.read_session() as s:
        rows = await source_store.listing(s, principal.user_id, prefix, after, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    context.note_results(len(rows))
    return {"files": [{"path": r["path"], "sha256": r["sha256"], "size_bytes": int(r["size_bytes"]),
                       "item_id": str(r["item_id"]), "status": r["status"], "updated_at": r["updated_at"].isoformat()}
                      for r in rows],
            "next_after": rows[-1]["path"] if more else None}
