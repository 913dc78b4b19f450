"""The one retry policy for calls to outside providers (embeddings, transcription, chat completions).

tenacity retries connection errors, 429 and 5xx answers with exponential backoff (a 429's Retry-After wins),
`attempts` times in all; anything else is raised at once. Callers turn the last error into their own.
"""

from __future__ import annotations

import email.utils
import time

import httpx
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

ATTEMPTS = 4  # the first try and three retries
MAX_WAIT_SEC = 60.0


def retryable(exc: BaseException) -> bool:
    """Connection errors, 429 and 5xx may pass on a later try; other refusals will not."""
    if isinstance(exc, httpx.HTTPStatusError):
        code = exc.response.status_code
        return code == 429 or code >= 500
    return isinstance(exc, httpx.TransportError)


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Backoff:
    """backoff * 2^(n-1) seconds before try n+1, capped; a 429's Retry-After instead when it names one."""

    def __init__(self, backoff: float, max_wait: float) -> None:
        self.backoff = backoff
        self.max_wait = max_wait

    def __call__(self, state: RetryCallState) -> float:
        wait = self.backoff * 2 ** (state.attempt_number - 1)
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code == 429:
            after = retry_after(exc.response.headers.get("retry-after"))
            if after is not None:
                wait = after
        return min(wait, self.max_wait)


def _policy(backoff: float, max_wait: float, attempts: int) -> dict[str, object]:
    return {"retry": retry_if_exception(retryable), "stop": stop_after_attempt(attempts),
            "wait": _Backoff(backoff, max_wait), "reraise": True}


def retrying(backoff: float, max_wait: float = MAX_WAIT_SEC, attempts: int = ATTEMPTS) -> Retrying:
    """The policy for blocking calls: `for attempt in retrying(...): with attempt: ...`."""
    return Retrying(**_policy(backoff, max_wait, attempts))  # type: ignore[arg-type]


def async_retrying(backoff: float, max_wait: float = MAX_WAIT_SEC, attempts: int = ATTEMPTS) -> AsyncRetrying:
    """The policy for async calls: `async for attempt in async_retrying(...): with attempt: ...`."""
    return AsyncRetrying(**_policy(backoff, max_wait, attempts))  # type: ignore[arg-type]
