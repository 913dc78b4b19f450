"""The ingest pipeline shared by REST `POST /ingest` and MCP `add_to_knowledge`.

Text and web pages are fetched, extracted, chunked, embedded and stored inside the request, so the
item is searchable when the call returns (`ready`). Pages that chunk into more than
`INLINE_CHUNK_LIMIT` pieces are stored at once and embedded by the worker (`processing`).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from lev import runtime
from lev.chunking import chunk_text, embed_chunks
from lev.errors import folder_not_found, ingest_failed, invalid_body, not_found
from lev.media_ingest import ingest_media_url
from lev.policy import Principal, filing_target, require
from lev.webfetch import UnsupportedMedia, canonical_url, classify_media_url, fetch_page
from store import contents as content_store
from store import folders as folder_store
from store.db import session_scope

INLINE_CHUNK_LIMIT = 60
MAX_TEXT_CHARS = 1_000_000
MAX_URL_CHARS = 4096


def _result(status: str, content_id: uuid.UUID, item_id: uuid.UUID, folder_id: uuid.UUID | None) -> dict[str, Any]:
    return {"status": status, "content_id": str(content_id), "user_item_id": str(item_id),
            "folder_id": str(folder_id) if folder_id else None}


async def ingest(
    principal: Principal, *, kind: str, url: str | None = None, text: str | None = None, title: str | None = None,
    in_kb: bool = True, auto_transform: bool = False, folder_id: uuid.UUID | None = None,
) -> dict[str, Any]:
    """Add a text snippet or a URL to the caller's library, filed into `folder_id` when given (else by the
    scope-size-1 rule); returns the Ingest result."""
    require(principal, "write")
    for name, value in (("url", url), ("text", text), ("title", title)):
        if value is not None and "\x00" in value:  # PostgreSQL text cannot hold NUL
            raise invalid_body(f"{name} must not contain NUL characters.")
    title = title.strip() or None if title else None
    if kind == "text":
        if url is not None:
            raise invalid_body("kind 'text' takes `text`, not `url`.")
        if text is None or not text.strip():
            raise invalid_body("kind 'text' needs a non-empty `text`.")
        if len(text) > MAX_TEXT_CHARS:
            raise invalid_body(f"text is limited to {MAX_TEXT_CHARS} characters.")
        principal = await _filing(principal, folder_id)
        return await _ingest_text(principal, text, title, in_kb, auto_transform)
    if kind == "url":
        if text is not None:
            raise invalid_body("kind 'url' takes `url`, not `text`.")
        if not url or not url.strip():
            raise invalid_body("kind 'url' needs a `url`.")
        if len(url) > MAX_URL_CHARS:
            raise invalid_body(f"url is limited to {MAX_URL_CHARS} characters.")
        principal = await _filing(principal, folder_id)
        return await _ingest_url(principal, url.strip(), title, in_kb, auto_transform)
    raise invalid_body("kind must be 'url' or 'text'.")


async def _filing(principal: Principal, folder_id: uuid.UUID | None) -> Principal:
    """The principal filing into `folder_id`: 403 forbidden_scope outside a scoped token's folders, 404
    folder_not_found (with `missing`) when the user has no such folder."""
    filing = filing_target(principal, folder_id)
    if folder_id is not None:
        async with session_scope() as s:
            if not await folder_store.owned_ids(s, principal.user_id, [folder_id]):
                raise folder_not_found("There is no such folder.", missing=[str(folder_id)])
    return filing


async def _store_new(
    principal: Principal, *, kind: str, title: str | None, body: str, url: str | None, canonical: str | None,
    metadata: dict[str, Any], in_kb: bool, auto_transform: bool,
) -> dict[str, Any]:
    bodies = await asyncio.to_thread(chunk_text, body, title)
    if not bodies:
        raise ingest_failed("there is no text to store")
    queued = len(bodies) > INLINE_CHUNK_LIMIT
    vectors = [] if queued else await embed_chunks(title, bodies)
    folder_id = principal.new_item_folder
    status = "processing" if queued else "ready"
    async with session_scope() as s:
        content_id = await content_store.create(
            s, kind=kind, title=title, text=body, url=url, canonical_url=canonical, metadata=metadata, status=status,
        )
        if content_id is None:  # the same page was stored meanwhile by someone else: share it
            assert canonical is not None
            existing = await content_store.by_canonical_url(s, canonical)
            assert existing is not None
            return await _new_item(s, principal, existing, kind, url, title, in_kb, auto_transform)
        if not queued:
            await content_store.add_chunks(s, content_id, title, bodies, vectors)
        item_id = await content_store.create_item(
            s, user_id=principal.user_id, content_id=content_id, kind=kind, title=title, url=url, in_kb=in_kb,
            auto_transform=auto_transform, status=status, folder_id=folder_id, created_by=principal.token_id,
        )
        if item_id is None:  # the token's folder was deleted while the request ran
            raise not_found()
    await _after_store(status, content_id, item_id, auto_transform)
    return _result(status, content_id, item_id, folder_id)


async def _new_item(s: Any, principal: Principal, existing: dict[str, Any], kind: str, url: str | None,
                    title: str | None, in_kb: bool, auto_transform: bool) -> dict[str, Any]:
    status = "ready" if existing["status"] == "ready" else "processing"
    folder_id = principal.new_item_folder
    item_id = await content_store.create_item(
        s, user_id=principal.user_id, content_id=existing["id"], kind=existing["kind"] or kind,
        title=title or existing["title"], url=url, in_kb=in_kb, auto_transform=auto_transform, status=status,
        folder_id=folder_id, created_by=principal.token_id,
    )
    if item_id is None:  # the token's folder was deleted while the request ran
        raise not_found()
    return {"_after": (status, existing["id"], item_id, auto_transform), **_result(status, existing["id"], item_id,
                                                                                    folder_id)}


async def _after_store(status: str, content_id: uuid.UUID, item_id: uuid.UUID, auto_transform: bool) -> None:
    if status == "processing":
        await runtime.enqueue("process_content", str(content_id))
    elif auto_transform:
        await runtime.enqueue("transform_item", str(item_id))


def title_from_text(text: str, limit: int = 80) -> str:
    """A snippet's title when none is given: its first line, cut at a word boundary."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) <= limit:
        return first
    cut = first[:limit].rsplit(" ", 1)[0]
    return (cut or first[:limit]) + "…"


async def _ingest_text(principal: Principal, text: str, title: str | None, in_kb: bool,
                       auto_transform: bool) -> dict[str, Any]:
    metadata = {} if title else {"title_from_text": True}
    return await _store_new(principal, kind="text", title=title or title_from_text(text), body=text, url=None,
                            canonical=None, metadata=metadata, in_kb=in_kb, auto_transform=auto_transform)


async def _ingest_url(principal: Principal, url: str, title: str | None, in_kb: bool,
                      auto_transform: bool) -> dict[str, Any]:
    if not url.lower().startswith(("http://", "https://")):
        raise ingest_failed("only http and https URLs can be ingested")
    media = classify_media_url(url)
    if media is not None:
        return await _ingest_media_url(principal, url, media, title, in_kb, auto_transform)
    try:
        canonical = canonical_url(url)
    except ValueError:
        raise ingest_failed("the URL cannot be parsed") from None
    async with session_scope() as s:
        existing = await content_store.by_canonical_url(s, canonical)
        if existing is not None and existing["status"] != "failed":
            result = await _new_item(s, principal, existing, "url", url, title, in_kb, auto_transform)
    if existing is not None and existing["status"] != "failed":
        await _after_store(*result.pop("_after"))
        return result
    if existing is not None:  # a failed earlier attempt: fetch again under a fresh record
        async with session_scope() as s:
            await content_store.update_content(s, existing["id"], canonical_url=None)
    try:
        page = await fetch_page(url)
    except UnsupportedMedia as exc:
        return await _ingest_media_url(principal, url, exc.kind, title, in_kb, auto_transform)
    result = await _store_new(
        principal, kind="url", title=title or page.title, body=page.text, url=url, canonical=canonical,
        metadata={**page.metadata, "final_url": page.url, "content_type": page.content_type},
        in_kb=in_kb, auto_transform=auto_transform,
    )
    if "_after" in result:
        await _after_store(*result.pop("_after"))
    return result


async def _ingest_media_url(principal: Principal, url: str, kind: str, title: str | None, in_kb: bool,
                            auto_transform: bool) -> dict[str, Any]:
    """YouTube, PDF, audio and video URLs go to the upload/media pipeline (lev.media_ingest)."""
    return await ingest_media_url(principal, url, kind, title=title, in_kb=in_kb, auto_transform=auto_transform)
