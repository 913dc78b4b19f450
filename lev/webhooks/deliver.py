"""One delivery attempt: sign the body as Standard Webhooks defines (`webhook-id`, `webhook-timestamp`,
`webhook-signature`, with the `standardwebhooks` package), POST it through the SSRF guard (checked at connect time,
no redirects, 10 s), and its outcome by the retry schedule: done, due again after the next delay, or failed after
the last. An endpoint failing for three days is disabled (`lev.webhooks.sender` runs the attempts and records them).

The secret is read from PostgreSQL with the delivery it signs and goes nowhere else: not into a log line or Redis.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import httpx
from standardwebhooks.webhooks import Webhook

from lev.core.errors import ApiError
from lev.net.guard import shared_client
from lev.plumbing.ports import Outbound

RETRY_DELAYS_SEC = (5, 300, 1800, 7200, 18000, 36000)  # after attempts 1-6; attempt 7 is the last
TIMEOUT_SEC = 10.0
RESPONSE_KEPT = 1024  # bytes of the receiver's answer kept for the deliveries list
LEASE_SEC = 30.0  # an attempt's hold on its delivery; a worker that dies frees it after this
DISABLE_AFTER = timedelta(days=3)
DISABLED_REASON = "disabled: every delivery failed for 3 days; fix the endpoint and enable it again"
CONNECTIONS = 512  # the client's connections: above the sender's attempts at once, so none waits for another's
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
            client = shared_client(outbound, TIMEOUT_SEC, USER_AGENT, connections=CONNECTIONS)
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


def outcome(error: str | None, made: int) -> tuple[str, float | None]:
    """An attempt's outcome by the schedule (`made` attempts so far, this one included): `succeeded`, `retrying`
    with the delay to the next attempt, or `failed` after the last."""
    if error is None:
        return "succeeded", None
    if made <= len(RETRY_DELAYS_SEC):
        return "retrying", float(RETRY_DELAYS_SEC[made - 1])
    return "failed", None
