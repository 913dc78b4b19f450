"""The archived copy of a fetched or captured page, made by the worker after the save that kept the page."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from lev.archive import service
from lev.archive.snapshot import BUILD_SEC


async def archive_page(ctx: dict[str, Any], content_id: str) -> int:
    """Make a content's archived copy (its size in bytes; 0 when there is none to make)."""
    async with asyncio.timeout(BUILD_SEC + 120):  # the build stops itself at BUILD_SEC; storing it takes the rest
        return await service.make(ctx["deps"], uuid.UUID(content_id))
