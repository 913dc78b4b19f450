"""One way in for every kind: `POST /api/v1/ingest`, MCP `add_to_knowledge`, imports and upload finalize.

    resolve (request) → link to an existing content (save) → acquire → chunk → plan → embed when inline
    → save in one transaction → enqueue the follow-up jobs after commit (followups)

Text and web pages are fetched, extracted, chunked, embedded and stored inside the request, so the item is
searchable when the call returns (`ready`); texts of more than `plan.INLINE_CHUNK_LIMIT` chunks are stored at once
and embedded by the worker (`processing`). Files go to the object store and are read now or by a job; audio, video
and YouTube without captions wait for their transcription (`transcribing`).
"""

from __future__ import annotations

from lev.auth.policy import Principal
from lev.embedding.pool import turn as embedding_turn
from lev.ingest import acquire as sources
from lev.ingest.chunking import embed_chunks
from lev.ingest.followups import enqueue
from lev.ingest.plan import chunk, plan
from lev.ingest.request import IngestRequest, Resolved, resolve
from lev.ingest.save import Stored, link_existing, save
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
    return saved.stored
