"""One way in for every kind: `POST /api/v1/ingest`, MCP `add_to_knowledge`, imports and upload finalize.

    resolve (request) → link to an existing content (save) → acquire → chunk → plan → embed when inline
    → save in one transaction → enqueue the follow-up jobs after commit (followups)

Text and web pages are fetched, extracted, chunked, embedded and stored inside the request, so the item is
searchable when the call returns (`ready`); texts of more than `plan.INLINE_CHUNK_LIMIT` chunks are stored at once
and embedded by the worker (`processing`). Files go to the object store and are read now or by a job; audio, video
and YouTube without captions wait for their transcription (`transcribing`).
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from lev.auth.policy import Principal
from lev.core.errors import ApiError
from lev.embedding.pool import turn as embedding_turn
from lev.ingest import acquire as sources
from lev.ingest.chunking import embed_chunks
from lev.ingest.followups import enqueue
from lev.ingest.formats import Attachment
from lev.ingest.plan import chunk, plan
from lev.ingest.request import IngestRequest, Resolved, resolve
from lev.ingest.save import Stored, link_existing, record_attachments, save
from lev.net import share
from lev.plumbing.deps import Deps
from lev.store import uploads as upload_store


async def ingest(deps: Deps, principal: Principal, req: IngestRequest) -> Stored:
    """Add a text snippet or a URL to the caller's library, filed into `req.folder_id` when given (else by the
    scope-size-1 rule), or a page as the user's browser rendered it (kind page: the user's own content)."""
    r = await resolve(deps, principal, req)
    linked = await link_existing(deps, r)
    if linked is not None:
        await enqueue(deps.queue, linked.followups)
        return linked.stored
    with share.on_behalf_of(principal.user_id):  # its fetches take the user's share of the outbound slots
        acquired = await sources.acquire(deps, r)
    return await keep(deps, r, acquired)


async def keep(deps: Deps, r: Resolved, acquired: sources.Acquired) -> Stored:
    """Chunk, plan, embed (when inline) and save what was acquired, then queue what follows. A file Lev
    downloaded for a URL is queued for deletion when it is not kept."""
    try:
        chunks = await chunk(acquired, deps.settings.max_chunks_per_item)
        p = plan(acquired, chunks)
        if p.embed_now and chunks.bodies:
            with embedding_turn(str(r.principal.user_id)):  # one run of each user's in turn, before any job's
                chunks.vectors = await embed_chunks(deps.embedder, p.title, chunks.bodies)
        saved = await save(deps, r, p, chunks)
    except BaseException:
        if acquired.source.path is not None and not acquired.source.upload:
            async with deps.db.transaction() as s:
                await upload_store.queue_deletion(s, [acquired.source.path])
        raise
    await enqueue(deps.queue, saved.followups)
    if isinstance(acquired, sources.Text) and acquired.attachments:
        links = [await _attachment(deps, r, saved.stored, a) for a in acquired.attachments]
        await record_attachments(deps, saved.stored.content_id, {**acquired.metadata, "attachments": links})
    return saved.stored


async def _attachment(deps: Deps, r: Resolved, message: Stored, a: Attachment) -> dict[str, Any]:
    """An e-mail's attachment kept as an item of its own (its file stored, read like an upload, filed where the
    message is), linked both ways: its `attached_to` names the message, the message lists it (or why it failed)."""
    local = await asyncio.to_thread(_spill, a.data)
    path = deps.objects.new_path(str(r.principal.user_id), a.filename)
    try:
        await deps.objects.put_file(path, local, a.mime)
        source = sources.Source(filename=a.filename, path=path, mime=a.mime, size=len(a.data),
                                attached_to=str(message.item_id))
        try:
            acquired = await sources.file(deps, source, local, None)
            acquired = replace(acquired, metadata={**acquired.metadata, "attached_to": str(message.item_id)})
            if isinstance(acquired, sources.Text):
                acquired = replace(acquired, attachments=())  # an attachment's own attachments are not unpacked
            stored = await keep(deps, replace(r, kind=acquired.kind, title=None, file=None), acquired)
        except ApiError as exc:
            async with deps.db.transaction() as s:
                await upload_store.queue_deletion(s, [path])
            return {"filename": a.filename, "item_id": None, "error": exc.message or exc.code}
        return {"filename": a.filename, "item_id": str(stored.item_id), "kind": acquired.kind}
    finally:
        local.unlink(missing_ok=True)


def _spill(data: bytes) -> Path:
    with tempfile.NamedTemporaryFile(prefix="lev-attachment-", delete=False) as fh:
        fh.write(data)
        return Path(fh.name)
