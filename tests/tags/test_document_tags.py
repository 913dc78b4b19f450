"""A document's own tags (a Markdown file's front matter `tags:`, which its reader leaves in the metadata, issue 48)
become its item's tags when Lev keeps it, beside the tags the request asked for, cut to fit as an import's are. Run
through Lev's own keep step (chunk, plan, embed, save) in this process, with what a document reader hands it."""

from __future__ import annotations

from lev.auth.policy import authenticate
from lev.ingest.acquire import Source, Text
from lev.ingest.request import Resolved
from lev.ingest.service import keep
from tests.stack import User
from tests.tags.test_tags_api import ok


def test_a_documents_own_tags_become_its_items_tags(api, user: User) -> None:
    token = user.token(write=True)
    principal = user.admin.run(lambda s: authenticate(s, token))
    deps = user.admin.job_ctx()["deps"]
    r = Resolved(principal, "text", "Daily note", True, False, text="x", tags=("asked",))
    read = Text("text", "Daily note", "Tide pools at low water, and what lives in them.", Source(filename="day.md"),
                {"format": "md", "tags": ["#Notes/Daily", "ASKED", "t" * 80, 7, ""]})
    stored = user.admin.run_coro(keep(deps, r, read))
    item = ok(api(token).get(f"/api/v1/items/{stored.item_id}"))
    assert item["tags"] == ["asked", "Notes/Daily", "t" * 64], item["tags"]
