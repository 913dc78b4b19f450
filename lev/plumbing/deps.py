"""What a request or a job runs with, built once per process by the composition root (`lev.runtime`) and handed in:
to a request's operation by its handler (`lev.handlers.deps()`), to a job through arq's `ctx["deps"]`."""

from __future__ import annotations

from dataclasses import dataclass

from lev.core.settings import Settings
from lev.plumbing.ports import Embedder, JobQueue, Mailer, Outbound, QueryEmbedder, Redis, Transcriber
from lev.store.db import Database
from lev.store.objects import ObjectStore


@dataclass(frozen=True)
class Deps:
    settings: Settings
    db: Database
    queue: JobQueue
    redis: Redis
    objects: ObjectStore
    embedder: Embedder  # owns its low-priority ingest processes, if any
    queries: QueryEmbedder  # search queries' embeddings (the embedder's), batched on their own thread
    transcriber: Transcriber | None
    mailer: Mailer | None = None  # LEV_SMTP_URL's server; None: Lev sends no mail

    @property
    def outbound(self) -> Outbound:
        """What the SSRF guard lets through, from the settings."""
        return Outbound.from_settings(self.settings)
