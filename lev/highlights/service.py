"""The highlight operations every surface shares (REST, the pages, the extension through REST): an item's
highlights, a new one (its passage found in the item's text), a changed note, a delete, the user's recent
highlights. Reads need the read capability and an item in scope; writes need write. A highlight is its user's
alone: another user's is 404 on every surface, even on an item both can see."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from lev.auth.policy import Principal, folder_visible, require
from lev.core import context
from lev.core.errors import ApiError, invalid_body, not_found
from lev.highlights import markdown, reader
from lev.highlights.locate import locate, relocate
from lev.plumbing.deps import Deps
from lev.store import highlights as store
from lev.store import items as item_store
from lev.store import members as member_store
from lev.webhooks import events

MAX_NOTE = 10_000


def clean_note(note: Any) -> str | None:
    """A note trimmed (None when blank), or 400 invalid_body."""
    if note is None:
        return None
    if not isinstance(note, str) or "\x00" in note:
        raise invalid_body("note must be text without NUL characters.")
    note = note.strip()
    if len(note) > MAX_NOTE:
        raise invalid_body(f"note must be at most {MAX_NOTE} characters.")
    return note or None


def event_data(h: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """What highlight.created and highlight.deleted tell a receiver."""
    return {"highlight_id": h["id"], "item_id": h["item_id"], "item_title": item["title"], "item_url": item["url"],
            "text": h["text"], "note": h["note"], "char_start": h["char_start"], "char_end": h["char_end"]}


async def _vector(deps: Deps, title: str | None, text: str, note: str | None) -> list[float]:
    """What search compares a query with: the item's title, the passage and its note (as a chunk is embedded)."""
    parts = [" ".join((title or "").split())[:200], text, note or ""]
    return (await asyncio.to_thread(deps.embedder.embed, ["\n\n".join(p for p in parts if p)]))[0]


async def of_item(deps: Deps, principal: Principal, item_id: uuid.UUID) -> list[dict[str, Any]]:
    async with deps.db.read_session() as s:
        if await store.item_body(s, principal.scope, item_id) is None:
            raise not_found()
        found = await store.of_item(s, principal.user_id, item_id)
    context.note_results(len(found))
    return found


async def create(deps: Deps, principal: Principal, item_id: uuid.UUID, body: dict[str, Any]) -> dict[str, Any]:
    """A new highlight of the item: the passage at `char_start`/`char_end` when it holds `text`, else where
    `text` occurs in the item's text (nearest the offsets given, the first without); 409 words_not_found when it
    does not."""
    require(principal, "write")
    text, note = body.get("text"), clean_note(body.get("note"))
    if not isinstance(text, str) or "\x00" in text:
        raise invalid_body("text must be the highlighted words, without NUL characters.")
    start, end = body.get("char_start"), body.get("char_end")  # hints: offsets that miss the words are searched
    async with deps.db.read_session() as s:
        item = await store.item_body(s, principal.scope, item_id)
    if item is None:
        raise not_found()
    if not item["text"]:
        raise ApiError("item_not_ready", "This item has no text to highlight (yet): wait until it is ready.")
    found: tuple[int, int] = await asyncio.to_thread(locate, item["text"], text, start, end)  # 40 ms at 1M characters
    start, end = found
    passage = item["text"][start:end]
    vector = await _vector(deps, item["title"], passage, note)
    async with deps.db.transaction() as s:
        locked = await store.item_body(s, principal.scope, item_id, lock=True)
        if locked is None or locked["text"] != item["text"]:  # deleted, or captured again, meanwhile
            raise not_found() if locked is None else ApiError(
                "item_changed", "The item's text changed meanwhile; try again.")
        made = await store.create(s, user_id=principal.user_id, item_id=item_id, text=passage, note=note,
                                  char_start=start, char_end=end, embedding=vector)
        await events.record(s, principal.user_id, "highlight.created", event_data(made, locked))
    return made


async def update(deps: Deps, principal: Principal, highlight_id: uuid.UUID, body: dict[str, Any]) -> dict[str, Any]:
    """Change a highlight's note (null or blank removes it)."""
    require(principal, "write")
    if "note" not in body:
        raise invalid_body("Send the note to set (null removes it).")
    note = clean_note(body["note"])
    async with deps.db.read_session() as s:
        found = await store.get_visible(s, principal.scope, highlight_id)
        item = await store.item_body(s, principal.scope, uuid.UUID(found["item_id"])) if found else None
    if found is None or item is None:
        raise not_found()
    vector = await _vector(deps, item["title"], found["text"], note)
    async with deps.db.transaction() as s:
        changed = await store.update_note(s, principal.scope, highlight_id, note, vector)
    if changed is None:
        raise not_found()
    return changed


async def delete(deps: Deps, principal: Principal, highlight_id: uuid.UUID) -> None:
    require(principal, "write")
    async with deps.db.transaction() as s:
        gone = await store.delete_visible(s, principal.scope, highlight_id)
        if gone is None:
            raise not_found()
        item = await store.item_body(s, principal.scope, uuid.UUID(gone["item_id"]))
        await events.record(s, principal.user_id, "highlight.deleted", event_data(gone, item or {"title": None,
                                                                                                "url": None}))


async def recent(deps: Deps, principal: Principal, *, folder_id: uuid.UUID | None = None, page: int = 1,
                 per_page: int = 50) -> dict[str, Any]:
    """The caller's highlights on the items it can see (of one folder), newest first, and their total."""
    if folder_id is not None and not folder_visible(principal.scope, folder_id):
        raise not_found()
    async with deps.db.read_session() as s:
        if folder_id is not None and not await _folder_seen(s, principal, folder_id):
            raise not_found()
        found, total = await store.list_recent(s, principal.scope, folder_id=folder_id, page=page, per_page=per_page)
    context.note_results(len(found))
    return {"highlights": found, "total": total, "page": page, "per_page": per_page}


async def _folder_seen(s: AsyncSession, principal: Principal, folder_id: uuid.UUID) -> bool:
    """The caller's own folder, or one shared with the caller."""
    return await member_store.role_of(s, principal.user_id, folder_id) is not None


async def as_markdown(deps: Deps, principal: Principal, item_id: uuid.UUID) -> tuple[str, str]:
    """The item as Markdown with the caller's highlights, and a file name for it."""
    async with deps.db.read_session() as s:
        item = await item_store.get_visible(s, principal.scope, item_id)
        if item is None:
            raise not_found()
        found = await store.of_item(s, principal.user_id, item_id)
    context.note_results(1)
    return markdown.render(item, found), markdown.filename(item["title"], item["id"])


async def text_replaced(s: AsyncSession, item_id: uuid.UUID, body: str, title: str | None,
                        url: str | None) -> list[dict[str, Any]]:
    """The item's text was replaced (its page captured again, its file updated), in the caller's transaction: every
    highlight is moved to its words in the new text; one whose words are gone is deleted (highlight.deleted to its
    user) and returned."""
    kept, lost = await asyncio.to_thread(relocate, body, await store.all_of_item(s, item_id))
    for h in kept:
        await store.move(s, uuid.UUID(h["id"]), char_start=h["char_start"], char_end=h["char_end"], text=h["text"])
    await store.delete_ids(s, [h["id"] for h in lost])
    for h in lost:
        await events.record(s, h["user_id"], "highlight.deleted", event_data(h, {"title": title, "url": url}))
    return lost


async def content_text_stored(s: AsyncSession, content_id: uuid.UUID, body: str, title: str | None) -> None:
    """A job stored a content's text: the highlights its items had (an updated file's, made on its old text) move to
    their words, as `text_replaced` moves them; a new content's items have none."""
    for item_id in await store.items_with_highlights(s, content_id):
        await text_replaced(s, item_id, body, title, None)


async def reading(deps: Deps, principal: Principal, item: dict[str, Any], part: int,
                  showing: str | None) -> tuple[list[dict[str, Any]], reader.View]:
    """The caller's highlights of a visible item (get_item's shape) and the part of its text the reader shows (the
    part where highlight `showing` starts, else `part`), with a PDF's page starts, a recording's moments, a
    presentation's slides and a document's heading lines."""
    async with deps.db.read_session() as s:
        marks = await store.of_item(s, principal.user_id, uuid.UUID(item["id"]))
        outline, moments = await store.reading_guides(s, uuid.UUID(item["content_id"]))
    body = item["text"] or item["transcript"] or ""
    return marks, reader.view(body, marks, part, showing=showing, pages=outline.pages, moments=moments,
                              labels=[(at, f"Slide {n}") for at, n in outline.slides],
                              headings=reader.heading_lines(body, outline) if outline.structured else ())
