"""What a request or a job runs with, built once per process by the composition root (`lev.runtime`) and handed in:
to a request's operation by its handler (`lev.handlers.deps()`), to a job through arq's `ctx["deps"]`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from lev.core.settings import Settings
from lev.embedding.embedder import Embedder
from lev.embedding.pool import QueryBatcher
from lev.net.guard import Outbound
from lev.providers.transcriber import Transcriber
from lev.store.db import Database
from lev.store.objects import ObjectStore


class Redis(Protocol):
    """The few Redis calls the domains make (progress figures, flags, the webhook senders' wake-up messages)."""

    async def set(self, name: str, value: str, ex: int | None = None) -> Any: ...

    async def get(self, name: str) -> Any: ...

    async def delete(self, *names: str) -> Any: ...

    async def publish(self, channel: str, message: str) -> Any: ...

    def pubsub(self, **kwargs: Any) -> Any: ...


class JobQueue(Protocol):
    """Where follow-up work goes (arq's pool): `enqueue_job(name, *args, _job_id=...)`."""

    async def enqueue_job(self, function: str, *args: Any, **kwargs: Any) -> Any: ...

    async def exists(self, *names: str) -> int: ...

    async def delete(self, *names: str) -> Any: ...


@dataclass(frozen=True)
class Deps:
    settings: Settings
    db: Database
    queue: JobQueue
    redis: Redis
    objects: ObjectStore
    embedder: Embedder  # owns its low-priority ingest processes, if any
    queries: QueryBatcher  # search queries' embeddings (the embedder's), batched on their own thread
    transcriber: Transcriber | None

    @property
    def outbound(self) -> Outbound:
        """What the SSRF guard lets through, from the settings."""
        return Outbound.from_settings(self.settings)
