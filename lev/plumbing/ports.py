"""The interfaces of the parts a request or a job is handed (`Deps`): the domains program against these, and the
composition root plugs in the adapters (`lev.embedding`, `lev.providers`, `lev.net`, arq, redis-py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from lev.core.settings import Settings


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


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors of `dim` floats (synchronous: async callers use a thread)."""

    dim: int
    name: str

    def embed(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...

    def embed_queries(self, texts: list[str]) -> list[list[float]]: ...

    def start(self) -> None: ...

    def close(self) -> None: ...


class QueryEmbedder(Protocol):
    """Search queries' vectors, computed off the event loop (batched under concurrency)."""

    def submit(self, text: str) -> asyncio.Future[list[float]]: ...


@dataclass
class Transcript:
    """A transcription result; `segments` are `{start, end, text}` dicts when the provider gives them."""

    text: str
    duration_sec: float | None = None
    language: str | None = None
    segments: list[dict[str, Any]] = field(default_factory=list)


class TranscriptionError(Exception):
    """The provider refused the file or kept failing; `retryable` says whether a later retry may work."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class Transcriber(Protocol):
    """Anything that turns an audio or video file into a transcript."""

    async def transcribe(self, path: Path, mime: str, filename: str) -> Transcript: ...


class Mailer(Protocol):
    """Anything that sends a plain-text e-mail (raises `MailError` when it could not)."""

    async def send(self, to: str, subject: str, body: str) -> None: ...


class MailError(RuntimeError):
    """The mail server refused the message or could not be reached."""


@dataclass(frozen=True)
class Outbound:
    """What the SSRF guard (`lev.net.guard`) lets through besides public addresses: every private address
    (LEV_ALLOW_PRIVATE_URLS), the networks of LEV_PRIVATE_URL_ALLOWLIST; and the extra CA outgoing TLS trusts
    (LEV_OUTBOUND_CA_FILE). Cloud metadata services are refused whatever it says."""

    allow_private: bool = False
    allowlist: tuple[str, ...] = ()
    ca_file: Path | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Outbound:
        return cls(settings.allow_private_urls, tuple(settings.private_url_allowlist), settings.outbound_ca_file)
