"""The import job: one slice of an import's links at a time (lev.imports.service)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from lev.imports.service import ENTRY_TIMEOUT_SEC, SLICE_SEC, run_slice


async def run_import(ctx: dict[str, Any], import_id: str, slice_no: int = 0) -> int:
    """Ingest the import's pending links for one slice (bounded concurrency), then queue the next slice."""
    async with asyncio.timeout(SLICE_SEC + ENTRY_TIMEOUT_SEC + 60):
        return await run_slice(ctx["deps"], uuid.UUID(import_id), int(slice_no))
