"""Speech-to-text behind the `Transcriber` interface (`lev.plumbing.ports`); one adapter for OpenAI-compatible APIs.

The adapter posts the media file to `{base}/audio/transcriptions` (OpenAI, Groq, self-hosted
whisper servers), retrying rate limits, 5xx and connection errors by the pipeline's one retry policy.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from lev.core.retry import ATTEMPTS, async_retrying, retryable
from lev.core.settings import Settings
from lev.plumbing.ports import Transcriber, Transcript, TranscriptionError

MAX_ATTEMPTS = ATTEMPTS


def _parse(response: httpx.Response) -> Transcript:
    ctype = response.headers.get("content-type", "")
    if "json" not in ctype:
        try:
            data: Any = response.json()
        except ValueError:
            return Transcript(text=response.text.strip())
    else:
        try:
            data = response.json()
        except ValueError as exc:
            raise TranscriptionError(f"Transcription provider returned invalid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise TranscriptionError("Transcription provider response has no text field.")
    segments = []
    for seg in data.get("segments") or []:
        if isinstance(seg, dict):
            text = str(seg.get("text", "")).strip()
            segments.append({"start": seg.get("start"), "end": seg.get("end"), "text": text})
    duration = data.get("duration")
    language = data.get("language")
    return Transcript(
        text=data["text"].strip(),
        duration_sec=float(duration) if isinstance(duration, (int, float)) else None,
        language=language if isinstance(language, str) and language else None,
        segments=segments,
    )


class OpenAITranscriber:
    """Adapter for the OpenAI-compatible `POST {base}/audio/transcriptions` endpoint."""

    def __init__(self, base_url: str, api_key: str | None, model: str, *, read_timeout: float = 300.0,
                 connect_timeout: float = 10.0, backoff_base: float = 1.0,
                 max_attempts: int = MAX_ATTEMPTS) -> None:
        self.url = base_url.rstrip("/") + "/audio/transcriptions"
        self.api_key = api_key
        self.model = model
        self.timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self.backoff_base = backoff_base
        self.max_attempts = max_attempts

    async def transcribe(self, path: Path, mime: str, filename: str) -> Transcript:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        data = {"model": self.model, "response_format": "verbose_json"}
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            try:
                async for attempt in async_retrying(self.backoff_base, attempts=self.max_attempts):
                    with attempt:
                        response = await self._post(client, path, mime, filename, headers, data)
            except httpx.HTTPStatusError as exc:
                status, detail = exc.response.status_code, exc.response.text[:300].strip()
                if not retryable(exc):
                    raise TranscriptionError(f"Transcription provider refused the file ({status}): {detail}") from None
                why = f"rate limited (429): {detail}" if status == 429 else f"provider error ({status}): {detail}"
                raise self._gave_up(why) from None
            except httpx.TransportError as exc:
                raise self._gave_up(f"{type(exc).__name__}: {exc}") from None
        return _parse(response)

    async def _post(self, client: httpx.AsyncClient, path: Path, mime: str, filename: str, headers: dict[str, str],
                    data: dict[str, str]) -> httpx.Response:
        fh = await asyncio.to_thread(Path(path).open, "rb")  # each attempt sends the whole file again
        try:
            response = await client.post(self.url, headers=headers, data=data, files={"file": (filename, fh, mime)})
        finally:
            fh.close()
        if not response.is_success:
            response.raise_for_status()
        return response

    def _gave_up(self, last_error: str) -> TranscriptionError:
        return TranscriptionError(f"Transcription failed after {self.max_attempts} attempts: {last_error}",
                                  retryable=True)


def transcriber_from(settings: Settings) -> Transcriber | None:
    """The configured transcriber, or None when `LEV_TRANSCRIBE_URL` is unset."""
    if not settings.transcribe_url:
        return None
    return OpenAITranscriber(settings.transcribe_url, settings.transcribe_api_key, settings.transcribe_model,
                             read_timeout=settings.transcribe_timeout_sec)
