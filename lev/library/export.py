"""`GET /api/v1/export`: the whole library as one JSON Lines stream, read from one database snapshot.

Lines, in order: `{"type": "lev_export", "version": 1, "exported_at"}`; one `folder` per folder (`id`, `name`);
one `item` per item (`id`, `kind`, `url`, or `text` for items without a URL, `title`, `metadata`, `folder_ids`,
`tags`, `in_kb`, `archived`, `read_at`, `progress`, `status`, `error`, `created_at`, and `archive` {`saved_at`,
`size_bytes`, `url`} when the item has an archived copy, which the file names but does not hold) each followed by
its `output` lines (`item_id`, `kind`, `content`, `generator`, `created_at`) and its `highlight` lines (`item_id`,
`text`, `note`, `char_start`, `char_end`, `created_at`: the exporting user's own); and an `end` line with the counts
(the archived copies' and their bytes among them), so a cut-off file is recognised.
`POST /api/v1/imports` reads the same file back (lev.imports.bookmarks).

An export holds the user's own items and folders only, and its first line says so (`items: "own"`): what other
members saved into folders shared with the user is theirs to export.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from lev.auth.policy import Principal, require, require_whole_library
from lev.core import clock
from lev.imports.importfile import LEV_EXPORT_TYPE, LEV_EXPORT_VERSION
from lev.store import export as export_store
from lev.store import highlights as highlight_store
from lev.store.db import Database

PAGE = 200
OWN_ONLY = ("Your own items and folders only: items other members saved into folders shared with you are theirs and "
            "are not in this file; your own items in those folders are, without the shared folders.")


def check(principal: Principal) -> None:
    """Export needs a whole-library token (read is implicit); raised before the stream starts."""
    require(principal, "read")
    require_whole_library(principal, "export the library")


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":")) + "\n").encode()


async def lines(db: Database, principal: Principal) -> AsyncIterator[bytes]:
    """The export, line by line (items a kb_only token cannot see are left out, as everywhere)."""
    counts = {"folders": 0, "items": 0, "outputs": 0, "highlights": 0, "archives": 0, "archive_bytes": 0}
    yield _line({"type": LEV_EXPORT_TYPE, "version": LEV_EXPORT_VERSION, "exported_at": clock.now().isoformat(),
                 "items": "own", "note": OWN_ONLY})
    async with db.read_snapshot() as s:
        for f in await export_store.all_folders(s, principal.user_id):
            counts["folders"] += 1
            yield _line({"type": "folder", "id": str(f["id"]), "name": f["name"],
                         "created_at": f["created_at"].isoformat()})
        after = None
        while True:
            page = await export_store.items_page(s, principal.scope.own_only(), after, PAGE)
            if not page:
                break
            outs = await export_store.outputs_of(s, [i["id"] for i in page])
            marked = await highlight_store.of_items(s, principal.user_id, [i["id"] for i in page])
            for item in page:
                counts["items"] += 1
                record: dict[str, Any] = {"type": "item", "id": str(item["id"]), "kind": item["kind"]}
                if item["url"] is not None:
                    record["url"] = item["url"]
                else:
                    record["text"] = item["text"] or ""
                record.update({
                    "title": item["title"], "metadata": item["metadata"] or {},
                    "folder_ids": sorted(str(f) for f in item["folder_ids"] or []), "tags": list(item["tags"] or []),
                    "in_kb": item["in_kb"], "archived": item["archived"],
                    "read_at": item["read_at"].isoformat() if item["read_at"] else None,
                    "progress": round(float(item["progress"]), 4), "status": item["status"], "error": item["error"],
                    "created_at": item["created_at"].isoformat()})
                if item["archive_saved_at"] is not None:
                    counts["archives"] += 1
                    counts["archive_bytes"] += int(item["archive_bytes"] or 0)
                    record["archive"] = {"saved_at": item["archive_saved_at"].isoformat(),
                                         "size_bytes": item["archive_bytes"],
                                         "url": f"/api/v1/items/{item['id']}/archive"}
                yield _line(record)
                for o in outs.get(item["id"], []):
                    counts["outputs"] += 1
                    yield _line({"type": "output", "item_id": str(item["id"]), "kind": o["kind"],
                                 "content": o["content"], "generator": o["generator"],
                                 "created_at": o["created_at"].isoformat()})
                for h in marked.get(item["id"], []):
                    counts["highlights"] += 1
                    yield _line({"type": "highlight", "item_id": h["item_id"], "text": h["text"], "note": h["note"],
                                 "char_start": h["char_start"], "char_end": h["char_end"],
                                 "created_at": h["created_at"]})
            after = (page[-1]["created_at"], page[-1]["id"])
    yield _line({"type": "end", **counts})
