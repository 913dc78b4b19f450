"""`make screenshots`: every page of the web app in real Chromium at 1280 px (`NAME.png`) and 390 px
(`NAME-phone.png`), into docs/screenshots, from a fresh Lev of its own (a temporary data directory) filled the way
a new user would fill it: two accounts, a shared folder, notes, a PDF, highlights with notes, a public page, a token
and a webhook. The pages are the real ones; nothing is staged in them.

    .venv/bin/python -m tests.screenshots [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from lev.embedded import running_postgres_url, running_redis_url
from tests import fixtures_media as fm
from tests.fixtures_answers import wait_ready
from tests.stack import ROOT, Admin, LiveServer, User
from tests.web.test_web import CHROMIUM, FLAGS, PASSWORD

NOTES = [("Kingfishers at the weir", "A kingfisher dived from the alder at the weir at dawn, twice, and came up with "
          "a minnow each time. The pair nests in the sandy bank below the footbridge."),
         ("Tide tables for August", "Spring tides on the 9th and the 23rd; the causeway is covered for two hours "
          "either side of high water. Low water at the harbour mouth around noon on the 12th."),
         ("Seal counts", "Forty-two grey seals hauled out on the north sandbank at low tide; eleven pups.")]
PLANKTON = ("Plankton\nCopepods swarm in the upper ocean at densities of ten\nthousand animals per cubic metre. "
            "They graze on diatoms and are in\nturn eaten by fish larvae and by the baleen whales of the\n"
            "southern seas.\nBiomass\nTheir total mass exceeds that of all the humans on Earth, by some esti-\n"
            "mates several times over, and it moves up and down each day.")
WIDTHS = {"": 1280, "-phone": 390}


def sign_up(page: Any, email: str) -> None:
    page.goto("/signup")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/")


def fill(server: LiveServer, admin: Admin, owner: str, reader: str, tmp: Path) -> dict[str, str]:
    """The library the shots show; the paths of its pages."""
    admin.sql("UPDATE users SET tier = 'pro'")
    ids = {e: admin.sql("SELECT id FROM users WHERE lower(email) = :e", e=e)[0][0] for e in (owner, reader)}
    token = User(ids[owner], owner, admin, "pro").token(write=True, kb_only=False, name="Claude Code")
    c = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
    folder = c.post("/api/v1/folders", json={"name": "Ocean reading"}).json()["id"]
    items = [c.post("/api/v1/ingest", json={"kind": "text", "title": t, "text": x, "folder_id": folder}).json()
             ["user_item_id"] for t, x in NOTES]
    data = fm.file_bytes(fm.make_text_pdf(tmp / "plankton.pdf", [PLANKTON], title="Plankton"))
    signed = c.post("/api/v1/uploads/signed-url", json={"mime": "application/pdf", "size": len(data),
                                                         "filename": "plankton.pdf"}).json()
    httpx.put(signed["signed_url"], content=data, headers={"Content-Type": "application/pdf"}, timeout=60)
    pdf = c.post(f"/api/v1/uploads/{signed['finalize_endpoint']}", json={
        "path": signed["path"], "mime": "application/pdf", "size": len(data), "filename": "plankton.pdf"}).json()
    c.post(f"/api/v1/items/{pdf['user_item_id']}/folders", json={"folder_ids": [folder]})
    wait_ready(c, [*items, pdf["user_item_id"]])
    c.post(f"/api/v1/items/{items[0]}/highlights", json={"text": "The pair nests in the sandy bank",
                                                        "note": "Check the bank again in May."})
    c.post(f"/api/v1/items/{pdf['user_item_id']}/highlights", json={"text": "densities of ten",
                                                                    "note": "Compare with krill."})
    invite = c.post(f"/api/v1/folders/{folder}/invitations", json={"email": reader, "role": "viewer"}).json()
    c.put(f"/api/v1/folders/{folder}/publication")
    c.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/lev-hook", "events": ["item.ready"],
                                     "description": "My automation"})
    c.get("/api/v1/search", params={"q": "kingfisher nests"})
    slug = c.get(f"/api/v1/folders/{folder}/publication").json().get("url", "")
    return {"folder": f"/folders/{folder}", "note": f"/items/{items[0]}", "pdf": f"/items/{pdf['user_item_id']}",
            "accept": invite["accept_url"], "public": slug}


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="lev-shots-"))
    (tmp / "data").mkdir()
    server = LiveServer(tmp / "data", {"LEV_RATE_LIMITS": "off", "LEV_ALLOW_PRIVATE_URLS": "true"}).start(600)
    admin = Admin(str(running_postgres_url(tmp / "data")), str(running_redis_url(tmp / "data")))
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            owner_ctx = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
            reader_ctx = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
            stranger_ctx = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
            for ctx in (owner_ctx, reader_ctx, stranger_ctx):
                ctx.set_default_timeout(60_000)
            owner, reader, stranger = owner_ctx.new_page(), reader_ctx.new_page(), stranger_ctx.new_page()
            owner_email, reader_email = "ada@example.com", "ben@example.com"
            sign_up(owner, owner_email)
            sign_up(reader, reader_email)
            paths = fill(server, admin, owner_email, reader_email, tmp)
            reader.goto(paths["accept"])
            reader.get_by_role("button", name="Accept").click()
            reader.wait_for_url("**/folders/*")
            shots: list[tuple[Any, str, str]] = [
                (owner, "library", "/"), (owner, "folder", paths["folder"]),
                (owner, "search", "/?q=kingfisher+nests"), (owner, "item", paths["note"]),
                (owner, "reader-view", paths["pdf"]), (owner, "highlights-page", "/highlights"),
                (owner, "import", "/import"), (owner, "integrations", "/settings/integrations"),
                (owner, "activity", "/activity"), (owner, "account", "/settings/account"),
                (reader, "folder-viewer", paths["folder"]), (stranger, "sign-in", "/login"),
                (stranger, "public", paths["public"].replace(server.url, "")), (stranger, "not-found", "/p/gone")]
            for suffix, width in WIDTHS.items():
                for tab, name, path in shots:
                    tab.set_viewport_size({"width": width, "height": 900})
                    tab.goto(path)
                    tab.wait_for_load_state("networkidle")
                    tab.screenshot(path=str(args.out / f"{name}{suffix}.png"), full_page=True)
                stranger.goto("/signup")
                stranger.get_by_label("Email").fill("new@example.com")
                stranger.get_by_label("Password").fill("short")
                stranger.get_by_role("button", name="Create account").click()
                stranger.get_by_role("alert").wait_for()
                stranger.screenshot(path=str(args.out / f"sign-up-error{suffix}.png"), full_page=True)
            browser.close()
        print(f"screenshots of {len(shots) + 1} pages at {', '.join(f'{w} px' for w in WIDTHS.values())} in "
              f"{args.out}")
    finally:
        admin.close()
        server.stop()
        time.sleep(1)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
