"""Jobs by fixed id: queueing the same work twice (a retried request, the reconciler, a sweep) finds the queued job
instead of adding a second."""

from __future__ import annotations

from typing import Any

from lev.plumbing.ports import JobQueue


def job_id(job: str, subject: object) -> str:
    """The one arq job id of `job` on `subject` (a content, item, feed, import or delivery id)."""
    return f"{job}:{subject}"


async def enqueue_job(queue: JobQueue, job: str, *args: Any, job_id: str) -> None:
    """Queue one job under its fixed id."""
    await queue.enqueue_job(job, *args, _job_id=job_id)


async def requeue(queue: JobQueue, job: str, *args: Any, job_id: str) -> bool:
    """Queue `job` under its fixed id unless that job is queued or running now (a finished run's result is
    cleared first, or arq would refuse the id); True when it was queued."""
    if await queue.exists(f"arq:job:{job_id}", f"arq:in-progress:{job_id}"):
        return False
    await queue.delete(f"arq:result:{job_id}", f"arq:retry:{job_id}")
    return await queue.enqueue_job(job, *args, _job_id=job_id) is not None
