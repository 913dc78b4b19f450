"""The service clock. Month boundaries (write caps, transcription quota) read it.

`LEV_CLOCK_OFFSET_SEC` shifts it for month-rollover tests and demos; it is 0 in production.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime


def now() -> datetime:
    return datetime.fromtimestamp(time.time() + float(os.environ.get("LEV_CLOCK_OFFSET_SEC", "0") or 0), UTC)


def month_key(at: datetime | None = None) -> str:
    at = at or now()
    return f"{at.year:04d}-{at.month:02d}"


def seconds_to_month_end(at: datetime | None = None) -> int:
    at = at or now()
    nxt = datetime(at.year + (at.month == 12), at.month % 12 + 1, 1, tzinfo=UTC)
    return max(1, int((nxt - at).total_seconds()) + 1)
