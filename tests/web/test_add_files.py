"""Issue 48 item 8, the web part: the Add card takes several files and a whole folder, in real Chromium. Three files
chosen at once become three items (a Markdown note titled by its front matter, a CSV, a text file); a folder's
notes are kept by their path, in folders named by it, its hidden files and a program skipped and listed; the same
folder again sends nothing (all unchanged, no upload made) and a changed note updates its item in place. The
script's table of file types is lev.core.mimes's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lev.core.mimes import NAME_MIME
from tests.stack import Admin
from tests.web.test_first_hour import as_user
from tests.web.test_web import browser, page, pytestmark, sign_up  # noqa: F401 (fixtures, the chromium skip)

UPLOAD_JS = Path(__file__).resolve().parents[2] / "web" / "static" / "upload.js"


def test_the_scripts_file_types_are_the_servers() -> None:
    script = UPLOAD_JS.read_text()
    table = script[script.index("const TYPES = {"):script.index("};", script.index("const TYPES = {"))]
    assert dict(re.findall(r'"(\.[a-z0-9]+)":\s*"([^"]+)"', table)) == NAME_MIME


def _outcomes(tab: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for li in tab.locator("#upload-result li").all():
        out.setdefault(li.get_attribute("data-outcome") or "", []).append(li.locator(".main").inner_text())
    return out


def _wait_done(tab: Any, summary: str) -> None:
    tab.locator("#upload-result [data-summary]").filter(has_text=summary).wait_for(timeout=120_000)


def test_several_files_and_a_folder_by_its_path(page: Any, admin: Admin, server: Any,  # noqa: F811
                                                tmp_path: Path) -> None:
    email = sign_up(page)
    api = as_user(page, admin, server, email)
    user_id = admin.sql("SELECT id FROM users WHERE lower(email) = :e", e=email.lower())[0][0]

    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "plan.md").write_text("---\ntitle: Reef survey plan\ntags: [reef]\n---\n# Week one\n\nCount the "
                                   "parrotfish on the north transect at dawn.\n")
    (loose / "counts.csv").write_text("Species,Count\nParrotfish,41\nGrouper,3\n")
    (loose / "log.txt").write_text("Dive log: visibility twenty metres, a turtle at the drop-off.\n")
    page.goto("/")
    page.set_input_files("#file", [str(loose / n) for n in ("plan.md", "counts.csv", "log.txt")])
    _wait_done(page, "Done: 3 added, 0 updated, 0 unchanged, 0 skipped, 0 failed.")
    assert sorted(_outcomes(page)["added"]) == ["counts.csv", "log.txt", "plan.md"]
    items = api.get("/api/v1/items", params={"per_page": 50}).json()["items"]
    assert sorted(i["kind"] for i in items) == ["markdown", "spreadsheet", "text"]
    assert "Reef survey plan" in [i["title"] for i in items]  # read as Markdown: its front matter's title
    assert all(i["folder_ids"] == [] for i in items)  # loose files are kept by no path

    # a folder: two levels of notes, hidden files and a program beside them
    notes = tmp_path / "Field notes"
    (notes / "week1").mkdir(parents=True)
    (notes / ".obsidian").mkdir()
    (notes / ".obsidian" / "app.json").write_text("{}")
    (notes / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (notes / "tool.exe").write_bytes(b"MZ\x90\x00" + b"\x00" * 60)
    (notes / "index.md").write_text("# Field notes\n\nWhere the reef survey's notes are kept.\n")
    (notes / "week1" / "monday.md").write_text("# Monday\n\nA hawksbill turtle fed on sponges by the wall.\n")
    (notes / "week1" / "tuesday.md").write_text("# Tuesday\n\nStrong current; the grouper hid under the ledge.\n")
    page.set_input_files("#folder-file", str(notes))
    _wait_done(page, "Done: 3 added, 0 updated, 0 unchanged, 3 skipped, 0 failed.")
    got = _outcomes(page)
    paths = ["Field notes/index.md", "Field notes/week1/monday.md", "Field notes/week1/tuesday.md"]
    assert sorted(got["added"]) == paths
    assert sorted(got["skipped"]) == ["Field notes/.DS_Store", "Field notes/.obsidian/", "Field notes/tool.exe"]
    said = page.locator('#upload-result li[data-outcome="skipped"]').all_inner_texts()
    assert any("tool.exe" in s and "does not read this type" in s for s in said), said
    assert any(".obsidian/" in s and "hidden" in s for s in said), said

    folders = {f["name"]: f for f in api.get("/api/v1/folders").json()["folders"]}
    assert folders["Field notes"]["item_count"] == 1 and folders["Field notes/week1"]["item_count"] == 2
    kept = {f["path"]: f for f in api.get("/api/v1/source-files").json()["files"]}
    assert sorted(kept) == paths
    week1 = api.get("/api/v1/items", params={"folder_id": folders["Field notes/week1"]["id"]}).json()["items"]
    assert sorted(i["title"] for i in week1) == ["Monday", "Tuesday"]
    assert api.get("/api/v1/items").json()["total"] == 6
    link = page.locator('#upload-result li[data-outcome="added"] a', has_text="monday.md")
    assert link.get_attribute("href") == f"/items/{kept['Field notes/week1/monday.md']['item_id']}"

    # the same folder again: nothing sent, nothing added
    uploads = admin.sql("SELECT count(*) FROM uploads WHERE user_id = :u", u=user_id)[0][0]
    page.set_input_files("#folder-file", str(notes))
    _wait_done(page, "Done: 0 added, 0 updated, 3 unchanged, 3 skipped, 0 failed.")
    assert admin.sql("SELECT count(*) FROM uploads WHERE user_id = :u", u=user_id)[0][0] == uploads
    assert api.get("/api/v1/items").json()["total"] == 6

    # a changed note updates its item in place (same id, the new text)
    (notes / "week1" / "tuesday.md").write_text("# Tuesday\n\nCalm water; a manta ray passed over the cleaning "
                                                "station.\n")
    page.set_input_files("#folder-file", str(notes))
    _wait_done(page, "Done: 0 added, 1 updated, 2 unchanged, 3 skipped, 0 failed.")
    assert _outcomes(page)["updated"] == ["Field notes/week1/tuesday.md"]
    tuesday = kept["Field notes/week1/tuesday.md"]["item_id"]
    assert "manta ray" in api.get(f"/api/v1/items/{tuesday}").json()["text"]
    assert api.get("/api/v1/items").json()["total"] == 6


def test_one_file_opens_its_item_and_dropped_files_are_listed(page: Any, admin: Admin, server: Any,  # noqa: F811
                                                              tmp_path: Path) -> None:
    email = sign_up(page)
    api = as_user(page, admin, server, email)
    page.goto("/")
    page.set_input_files("#file", {"name": "setup.exe", "mimeType": "application/x-msdownload", "buffer": b"MZ\x90"})
    alert = page.locator("#dropzone [role=alert]")
    alert.wait_for()
    assert "This kind of file is not supported" in alert.inner_text()
    assert api.get("/api/v1/items").json()["total"] == 0

    note = tmp_path / "kelp.md"
    note.write_text("# Kelp forests\n\nGiant kelp grows half a metre a day.\n")
    page.set_input_files("#file", str(note))  # one file: its item's page, as before
    page.wait_for_url("**/items/*", timeout=60_000)
    assert page.locator("h1").inner_text() == "Kelp forests"

    page.add_init_script("""(() => {  // files in flight: from their signed-URL request to their finalize's answer
      const fetch0 = window.fetch; window.__inFlight = 0; window.__mostInFlight = 0;
      window.fetch = async (url, init) => {
        const signing = String(url).endsWith("/uploads/signed-url");
        if (signing) window.__mostInFlight = Math.max(window.__mostInFlight, ++window.__inFlight);
        const res = await fetch0(url, init);
        if (/\\/uploads\\/finalize/.test(String(url)) || (signing && !res.ok)) window.__inFlight -= 1;
        return res;
      };
    })()""")
    page.goto("/")
    page.evaluate("""() => {
      const dt = new DataTransfer();
      for (const n of ["crabs", "eels", "wrasse"]) dt.items.add(new File([`Notes on ${n} by the reef.`], `${n}.txt`));
      dt.items.add(new File(["Urchins graze the kelp down to the rock."], "urchins.txt", { type: "text/plain" }));
      dt.items.add(new File(["Sea otters eat urchins."], "otters.txt", { type: "" }));
      dt.items.add(new File(["MZ"], "otter.exe", { type: "application/x-msdownload" }));
      dt.items.add(new File(["no PDF at all"], "fake.pdf", { type: "application/pdf" }));
      const drop = new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true });
      document.getElementById("dropzone").dispatchEvent(drop);
    }""")
    _wait_done(page, "Done: 5 added, 0 updated, 0 unchanged, 1 skipped, 1 failed.")
    assert page.evaluate("window.__mostInFlight") == 3  # a few at a time, not all six at once
    failed = page.locator('#upload-result li[data-outcome="failed"]').inner_text()
    assert "fake.pdf" in failed and "not application/pdf" in failed, failed  # the server's reason, in words
    titles = sorted(i["title"] for i in api.get("/api/v1/items").json()["items"])
    assert len(titles) == 6 and titles[0] == "Kelp forests", titles
