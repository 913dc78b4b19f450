"""Jobs that turn queued files into text: document extraction (OCR) and transcription (with the quota charge)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from lev.core.errors import ApiError
from lev.ingest import formats
from lev.ingest.documents import Extracted, extract
from lev.ingest.finish import fail_content, finish_content
from lev.ingest.media import EXT_MIME, media_duration_seconds
from lev.ingest.youtube import youtube_audio
from lev.ops import logs
from lev.plumbing.deps import Deps
from lev.plumbing.ports import Transcript, TranscriptionError
from lev.store import contents as content_store
from lev.store import lifecycle
from lev.tasks.jobs import work_bound

log = logs.get_logger("lev.media")


async def _queued(deps: Deps, content_id: uuid.UUID) -> dict[str, Any] | None:
    """The content row while it is still waiting for this job, else None."""
    async with deps.db.read_session() as s:
        row = await content_store.get_content(s, content_id)
    return row if row is not None and row["status"] == lifecycle.Status.PROCESSING else None


async def extract_document(ctx: dict[str, Any], content_id: str) -> int:
    """Extract (OCR) and embed a queued PDF or image upload, or read a large document (Office, e-book, text
    formats), within a time bound from its size."""
    cid = uuid.UUID(content_id)
    row = await _queued(ctx["deps"], cid)
    if row is None or not row["object_path"]:
        return 0
    async with asyncio.timeout(work_bound(size_bytes=row["size_bytes"] or 0)):
        return await _extract(ctx, cid, row)


async def _extract(ctx: dict[str, Any], cid: uuid.UUID, row: dict[str, Any]) -> int:
    deps: Deps = ctx["deps"]
    try:
        local = await deps.objects.local_copy(row["object_path"])
    except FileNotFoundError:
        await fail_content(deps, cid, "the uploaded file is gone")
        return 0
    meta = row["metadata"] or {}
    found = formats.resolve(meta.get("filename") or "", row["mime"])
    try:
        if found is not None and found[0] in formats.KINDS:
            document = await formats.read(found[1], str(local), meta.get("filename") or "",
                                          seconds=formats.time_bound(row["size_bytes"] or 0))
            doc = Extracted(document.text, document.metadata, document.outline)
            retitle = document.title if meta.get("title_from_file") else None
        else:
            doc, retitle = await asyncio.to_thread(extract, local, row["mime"]), None
    except ApiError as exc:
        await fail_content(deps, cid, exc.message or exc.code)
        return 0
    except Exception as exc:
        log.exception("document extraction failed", content_id=str(cid))
        await fail_content(deps, cid, f"extraction failed: {exc}")
        return 0
    finally:
        local.unlink(missing_ok=True)
    metadata = {**meta, **doc.metadata}
    metadata.pop("title_from_file", None)
    return await finish_content(deps, cid, row["title"], doc.text, content_values={"metadata": metadata},
                                outline=doc.outline, retitle=retitle)


async def _transcribe(ctx: dict[str, Any], row: dict[str, Any], workdir: Path) -> tuple[Transcript, float] | None:
    """Fetch the media (stored object or YouTube audio) and transcribe it; None when there is none."""
    if row["object_path"]:
        local = await ctx["deps"].objects.local_copy(row["object_path"])
        mime, filename = row["mime"], PurePosixPath(row["object_path"]).name
    elif row["kind"] == "youtube" and row["url"]:
        local = await youtube_audio(row["url"], workdir)
        mime = "audio/webm" if local.suffix.lower() == ".webm" else EXT_MIME.get(local.suffix.lower(), "audio/mp4")
        filename = local.name
    else:
        return None
    try:
        duration = await asyncio.to_thread(media_duration_seconds, local)
        return await ctx["deps"].transcriber.transcribe(local, mime, filename), duration
    finally:
        local.unlink(missing_ok=True)


async def transcribe_content(ctx: dict[str, Any], content_id: str, user_id: str) -> int:
    """Transcribe queued audio, video or YouTube content, store and embed the transcript, charge the duration;
    within a time bound from the media's size and length."""
    cid = uuid.UUID(content_id)
    row = await _queued(ctx["deps"], cid)
    if row is None:
        return 0
    bound = work_bound(size_bytes=row["size_bytes"] or 0, media_sec=row["duration_sec"] or 0.0)
    async with asyncio.timeout(bound):
        return await _transcribe_and_finish(ctx, cid, row, uuid.UUID(user_id))


async def _transcribe_and_finish(ctx: dict[str, Any], cid: uuid.UUID, row: dict[str, Any], user_id: uuid.UUID) -> int:
    deps: Deps = ctx["deps"]
    if deps.transcriber is None:
        await fail_content(deps, cid, "transcription is not configured on this server")
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="lev-media-"))
    try:
        done = await _transcribe(ctx, row, workdir)
    except TranscriptionError as exc:
        return await _failed(deps, cid, str(exc))
    except ApiError as exc:
        return await _failed(deps, cid, exc.message or exc.code)
    except FileNotFoundError:
        return await _failed(deps, cid, "the media file is gone")
    except Exception as exc:
        log.exception("transcription failed", content_id=str(cid))
        return await _failed(deps, cid, f"transcription failed: {exc}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if done is None:
        return await _failed(deps, cid, "there is no media to transcribe")
    transcript, duration = done
    metadata = {**(row["metadata"] or {}), "duration_sec": round(duration, 3)}
    if transcript.language:
        metadata["language"] = transcript.language
    if transcript.segments:
        metadata["segments"] = len(transcript.segments)
    return await finish_content(
        deps, cid, row["title"], transcript.text,
        content_values={"duration_sec": duration, "metadata": metadata},
        charge=(user_id, duration), segments=transcript.segments, field="transcript",
    )


async def _failed(deps: Deps, content_id: uuid.UUID, message: str) -> int:
    await fail_content(deps, content_id, message)
    return 0
