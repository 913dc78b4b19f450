"""The work that follows a commit, queued from this one place: the job that finishes a stored content, and the
transforms of ready items. Jobs on a content or an item have a fixed job id, so queueing the same work twice (a
retried request, the reconciler) finds the queued job instead of adding a second."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from lev.plumbing.jobs import job_id
from lev.plumbing.ports import JobQueue

EXTRACT = "extract_document"  # OCR or a large document, by the worker
EMBED = "process_content"  # chunk and embed stored text, by the worker
TRANSCRIBE = "transcribe_content"  # audio, video, YouTube without captions
TRANSFORM = "transform_item"  # AI outputs of an item that asked for them
ARCHIVE = "archive_page"  # the archived copy of a fetched or captured page (lev.archive)


@dataclass(frozen=True)
class Followup:
    job: str
    args: tuple[str, ...]

    @property
    def job_id(self) -> str:
        return job_id(self.job, self.args[0])



def finishing(job: str | None, content_id: uuid.UUID, user_id: uuid.UUID) -> list[Followup]:
    """The job that finishes a content stored unfinished (none when it was stored ready)."""
    if job is None:
        return []
    if job == TRANSCRIBE:
        return [Followup(job, (str(content_id), str(user_id)))]
    return [Followup(job, (str(content_id),))]


def archiving(content_id: uuid.UUID) -> list[Followup]:
    return [Followup(ARCHIVE, (str(content_id),))]


def transforms(item_ids: list[uuid.UUID]) -> list[Followup]:
    return [Followup(TRANSFORM, (str(i),)) for i in item_ids]


async def enqueue(queue: JobQueue, followups: list[Followup]) -> None:
    """Queue the follow-up jobs (after the commit that made them due)."""
    for f in followups:
        await queue.enqueue_job(f.job, *f.args, _job_id=f.job_id)
