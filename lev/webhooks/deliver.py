"""One delivery attempt: take the delivery from the outbox, sign the body as Standard Webhooks defines
(`webhook-id`, `webhook-timestamp`, `webhook-signature`, with the `standardwebhooks` package), POST it through the
SSRF guard (checked at connect time, no redirects, 10 s), and record the outcome: done, due again after the next
delay of the schedule, or failed after the last. An endpoint failing for three days is disabled.

The secret is read from PostgreSQL for each attempt and goes nowhere else: not into a job's arguments, a log
line or Redis.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
from standardwebhooks.webhooks import Webhook

from lev.core import clock
from lev.core.errors import ApiError
from lev.net.guard import shared_client
from lev.plumbing.deps import Deps
from lev.plumbing.jobs import requeue
from lev.plumbing.ports import Outbound
from lev.store import webhooks as webhook_store
from lev.webhooks import events

RETRY_DELAYS_SEC = (5, 300, 1800, 7200, 18000, 36000)  # after attempts 1-6; attempt 7 is the last
TIMEOUT_SEC = 10.0
RESPONSE_KEPT = 1024  # bytes of the receiver's answer kept for the deliveries list
LEASE_SEC = 30.0  # an attempt's hold on its delivery; a worker that dies frees it after this
DISABLE_AFTER = timedelta(days=3)
USER_AGENT = "Lev-Webhooks/1.0 (+Standard Webhooks)"


def signature(secrets: list[str], event_id: str, at: datetime, body: str) -> str:
    """The `webhook-signature` value: one `v1,<base64>` per live secret, space-separated."""
    return " ".join(Webhook(secret).sign(event_id, at, body) for secret in secrets)


def signed_headers(delivery: dict[str, Any], body: str, at: datetime) -> dict[str, str]:
    secrets = [delivery["secret"]]
    if delivery["previous_secret"] and delivery["old_valid"]:
        secrets.append(delivery["previous_secret"])
    return {"content-type": "application/json", "webhook-id": delivery["event_id"],
            "webhook-timestamp": str(int(at.timestamp())), "webhook-signature": signature(secrets,
                                                                                          delivery["event_id"], at,
                                                                                          body)}


async def post(outbound: Outbound, url: str, body: str,
               headers: dict[str, str]) -> tuple[int | None, str | None, str | None]:
    """POST once: (status code, error in words, at most 1 KB of the answer)."""
    try:
        async with asyncio.timeout(TIMEOUT_SEC):
            client = shared_client(outbound, TIMEOUT_SEC, USER_AGENT)
            async with client.stream("POST", url, content=body.encode(), headers=headers) as resp:
                kept = bytearray()
                async for piece in resp.aiter_bytes():
                    kept += piece
                    if len(kept) >= RESPONSE_KEPT:
                        break
                text = bytes(kept[:RESPONSE_KEPT]).decode("utf-8", errors="replace") or None
                code = resp.status_code
                if 200 <= code < 300:
                    return code, None, text
                if 300 <= code < 400:
                    where = resp.headers.get("location", "")[:200]
                    return code, f"redirects are not followed (HTTP {code} to {where or 'nowhere'})", text
                return code, f"the endpoint answered HTTP {code}", text
    except ApiError as exc:  # the guard refused the address, or the host does not resolve
        return None, exc.message or exc.code, None
    except TimeoutError:
        return None, f"no answer within {TIMEOUT_SEC:g} s", None
    except httpx.TimeoutException:
        return None, f"no answer within {TIMEOUT_SEC:g} s", None
    except httpx.ConnectError as exc:
        return None, f"could not connect: {str(exc) or 'connection failed'}"[:300], None
    except httpx.HTTPError as exc:
        return None, f"the request failed: {type(exc).__name__}: {exc}"[:300], None


async def attempt(deps: Deps, delivery_id: uuid.UUID) -> str | None:
    """One attempt of a delivery; its outcome (`succeeded`, `retrying`, `failed`), or None when there was nothing
    to do (done, not due, taken by another attempt, endpoint disabled)."""
    async with deps.db.transaction() as s:
        delivery = await webhook_store.claim(s, delivery_id, LEASE_SEC)
    if delivery is None:
        return None
    body = json.dumps(delivery["payload"], separators=(",", ":"), ensure_ascii=False)
    at = clock.now()
    started = time.perf_counter()
    code, error, answer = await post(deps.outbound, delivery["url"], body, signed_headers(delivery, body, at))
    duration_ms = int((time.perf_counter() - started) * 1000)
    made = int(delivery["attempts"]) + 1
    delay: float | None = None
    if error is None:
        outcome = "succeeded"
    elif made <= len(RETRY_DELAYS_SEC):
        outcome, delay = "retrying", float(RETRY_DELAYS_SEC[made - 1])
    else:
        outcome = "failed"
    next_at = clock.now() + timedelta(seconds=delay) if delay is not None else None
    async with deps.db.transaction() as s:
        await webhook_store.record_attempt(s, delivery, status=outcome, status_code=code, error=error,
                                           response=answer, duration_ms=duration_ms, next_attempt_at=next_at)
        if outcome != "succeeded":
            await webhook_store.disable_if_failing_since(
                s, delivery["webhook_id"], clock.now() - DISABLE_AFTER,
                "disabled: every delivery failed for 3 days; fix the endpoint and enable it again")
    if delay is not None:
        await events.queue_attempts([(delivery_id, made)], defer_sec=delay, queue=deps.queue)
    return outcome


async def requeue_due(deps: Deps, grace_sec: float = 5.0) -> int:
    """The sweep: queue every due pending delivery whose job is missing (lost with Redis, or never queued because
    a process died between its commit and the nudge). Returns how many were queued."""
    async with deps.db.transaction() as s:
        due = await webhook_store.due(s, clock.now() - timedelta(seconds=grace_sec))
    queued = 0
    for row in due:
        job_id = events.delivery_job_id(row["id"], row["attempts"])
        if await requeue(deps.queue, events.DELIVER_JOB, str(row["id"]), job_id=job_id):
            queued += 1
    return queued
