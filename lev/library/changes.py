"""An item's own fields changed by its saver: its title, whether it is in the knowledge base, archived, read
(`read_at`) and how far it was read (`progress`, 0 to 1). One transaction; `item.updated` names the fields whose
value changed (none: no event). Reading an item on any surface (MCP above all) never changes its reading state:
only this operation does."""

from __future__ import annotations

import math
import uuid
from typing import Any

from lev.auth.policy import Principal, require
from lev.core.errors import invalid_body
from lev.plumbing.deps import Deps
from lev.store import items as item_store
from lev.tags.service import refuse_change
from lev.webhooks import events


def _checked(body: dict[str, Any]) -> dict[str, Any]:
    """The fields to set, each checked (400 invalid_body naming it otherwise)."""
    changes = dict(body)
    if "title" in changes:
        title = changes["title"].strip() if isinstance(changes["title"], str) else ""
        if not title or "\x00" in title or len(title) > 500:
            raise invalid_body("title must be 1-500 characters after trimming, without NUL.", parameter="title")
        changes["title"] = title
    if "progress" in changes:
        value = changes["progress"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not 0 <= value <= 1:
            raise invalid_body("progress must be a number from 0 to 1.", parameter="progress")
        changes["progress"] = float(value)
    for flag in ("in_kb", "archived", "read"):
        if flag in changes and not isinstance(changes[flag], bool):
            raise invalid_body(f"{flag} must be true or false.", parameter=flag)
    return changes


async def update_item(deps: Deps, principal: Principal, item_id: uuid.UUID, body: dict[str, Any]) -> dict[str, Any]:
    """Change the fields sent on the caller's own item; its summary after. 403 forbidden_scope for an item saved by
    another member of a shared folder, 404 for one the token cannot see."""
    require(principal, "write")
    changes = _checked(body)
    async with deps.db.transaction() as s:
        done = await item_store.update_own(s, principal.scope, item_id, changes)
        if done is None:
            await refuse_change(s, principal.scope, item_id)
        summary, changed = done
        await events.items_updated(s, [item_id], changed)
    return summary
