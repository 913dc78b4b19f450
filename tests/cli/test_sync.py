"""`lev sync DIR --url URL --folder NAME` against the live server, run in this process (one subprocess for the
command's own front door): new files sent, sub-folders mirrored as folders, a second run over an unchanged folder
writes nothing, a changed file updates its item in place, `--delete` removes the items of files gone, a refused file
is not sent again until it changes, an interrupted run is taken up where it stopped, `--watch` follows changes
(issue 48 item 5)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from lev.sync import command
from lev.sync.client import Client
from lev.sync.run import Progress
from tests.stack import ROOT, User

NOTES = {
    "Welcome.md": "---\ntitle: Start here\n---\n# Welcome\n\nThe heron fishes at dawn by the old lock.\n",
    "Projects/Plan.md": "# Plan\n\nRebuild the dry-stone wall before the first frost.\n",
    "Projects/Deep/Ideas.txt": "Grow samphire on the salt marsh.\n",
    ".obsidian/app.json": '{"theme": "dark"}',
    "tool.exe": "MZ not for Lev",
}


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


class Run:
    """`lev sync` in this process against the session server, its state in the test's own cache folder."""

    def __init__(self, server: Any, token: str, root: Path, folder: str, cache: Path) -> None:
        self.url, self.token, self.root, self.folder, self.cache = server.url, token, root, folder, cache
        self.client: Client | None = None

    def __call__(self, *more: str, transport: httpx.BaseTransport | None = None,
                 stop: threading.Event | None = None) -> tuple[int, str, int]:
        """(exit status, its summary line, the requests that changed something)."""
        self.client = Client(self.url, self.token, transport=transport, pause=0.01)
        out = io.StringIO()
        old, sys.stdout = sys.stdout, out
        try:
            code = command.main([str(self.root), "--url", self.url, "--folder", self.folder, "--token", self.token,
                                 *more],
                                client=self.client, stop=stop)
        finally:
            sys.stdout = old
            self.client.close()
        lines = out.getvalue().strip().splitlines()
        return code, lines[-1] if lines else "", self.client.writes


@pytest.fixture
def sync(server, user: User, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Run, httpx.Client]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    token = user.token(write=True, kb_only=False)
    root = tmp_path / "notes"
    root.mkdir()
    write(root, NOTES)
    c = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"})
    return Run(server, token, root, "Notes", tmp_path / "cache"), c


def kept(c: httpx.Client) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in c.get("/api/v1/source-files", params={"prefix": "Notes/"}).json()["files"]}


def test_a_folder_synced_twice_then_changed_sends_only_what_changed(sync: tuple[Run, httpx.Client]) -> None:
    run, c = sync
    os.symlink("/etc/passwd", run.root / "passwd.md")  # never followed
    code, line, writes = run()
    assert (code, line) == (0, "lev sync: 3 added, 0 updated, 0 unchanged, 0 deleted, 1 skipped, 0 failed")
    assert writes == 9  # three files, three calls each (signed URL, PUT, finalize)
    files = kept(c)
    assert sorted(files) == ["Notes/Projects/Deep/Ideas.txt", "Notes/Projects/Plan.md", "Notes/Welcome.md"]
    names = {f["name"]: f["id"] for f in c.get("/api/v1/folders").json()["folders"]}
    assert sorted(names) == ["Notes", "Notes/Projects", "Notes/Projects/Deep"]
    plan = c.get(f"/api/v1/items/{files['Notes/Projects/Plan.md']['item_id']}").json()
    assert plan["folder_ids"] == [names["Notes/Projects"]] and "dry-stone wall" in plan["text"]
    welcome = c.get(f"/api/v1/items/{files['Notes/Welcome.md']['item_id']}").json()
    assert (welcome["kind"], welcome["title"]) == ("markdown", "Start here")

    code, line, writes = run()  # nothing changed: a listing, no write
    assert (code, writes) == (0, 0) and "0 added, 0 updated, 3 unchanged" in line
    assert kept(c) == files

    (run.root / "Projects/Plan.md").write_text("# Plan\n\nRebuild the dry-stone wall; then plant the hedge.\n")
    (run.root / "Projects/Deep/Ideas.txt").unlink()
    write(run.root, {"Later.md": "# Later\n\nMend the boat's sail.\n"})
    code, line, writes = run()  # without --delete, the gone file's item stays
    assert "1 added, 1 updated, 1 unchanged, 0 deleted" in line and writes == 6
    now = kept(c)
    assert now["Notes/Projects/Plan.md"]["item_id"] == files["Notes/Projects/Plan.md"]["item_id"]
    assert now["Notes/Projects/Plan.md"]["sha256"] != files["Notes/Projects/Plan.md"]["sha256"]
    plan = c.get(f"/api/v1/items/{now['Notes/Projects/Plan.md']['item_id']}").json()
    assert "plant the hedge" in plan["text"] and plan["folder_ids"] == [names["Notes/Projects"]]
    assert "Notes/Projects/Deep/Ideas.txt" in now

    code, line, writes = run("--delete")
    assert "0 added, 0 updated, 3 unchanged, 1 deleted" in line and writes == 1
    assert "Notes/Projects/Deep/Ideas.txt" not in kept(c)
    assert c.get(f"/api/v1/items/{files['Notes/Projects/Deep/Ideas.txt']['item_id']}").status_code == 404


def test_a_refused_file_is_not_sent_again_until_it_changes(sync: tuple[Run, httpx.Client]) -> None:
    run, c = sync
    write(run.root, {"Scan.pdf": "not a PDF, whatever its name says"})
    code, line, writes = run()
    assert code == 0 and "3 added" in line and "2 skipped" in line and writes == 12
    code, line, writes = run()
    assert (code, writes) == (0, 0) and "2 skipped" in line
    write(run.root, {"Scan.pdf": "still not a PDF"})
    code, line, writes = run()
    assert writes == 3 and "2 skipped" in line  # its new bytes were tried once


class Breaks(httpx.BaseTransport):
    """The network failing for good after `after` finalize calls (a laptop closed mid-run)."""

    def __init__(self, after: int) -> None:
        self.inner = httpx.HTTPTransport()
        self.left = after

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if "/finalize" in request.url.path:
            if self.left <= 0:
                raise httpx.ConnectError("the network is gone", request=request)
            self.left -= 1
        return self.inner.handle_request(request)


def test_an_interrupted_run_is_taken_up_where_it_stopped(sync: tuple[Run, httpx.Client]) -> None:
    run, c = sync
    code, _line, _writes = run(transport=Breaks(after=1))
    assert code == 2 and len(kept(c)) == 1
    code, line, writes = run()
    assert code == 0 and "2 added, 0 updated, 1 unchanged" in line and writes == 6
    assert len(kept(c)) == 3


def wait_for(pred: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_watch_follows_the_folder_until_stopped(sync: tuple[Run, httpx.Client]) -> None:
    run, c = sync
    stop = threading.Event()
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(run("--watch", stop=stop)))
    thread.start()
    try:
        wait_for(lambda: len(kept(c)) == 3, "the first run")
        write(run.root, {"Projects/Plan.md": "# Plan\n\nThe wall is done; the hedge is planted.\n"})
        plan_id = kept(c)["Notes/Projects/Plan.md"]["item_id"]
        wait_for(lambda: "hedge is planted" in (c.get(f"/api/v1/items/{plan_id}").json()["text"] or ""),
                 "the changed note's new text")
        write(run.root, {"New/Fresh.md": "# Fresh\n\nA new note while watching.\n"})
        wait_for(lambda: "Notes/New/Fresh.md" in kept(c), "the new note")
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive() and result and result[0][0] == 0


def test_tokens_and_refusals_are_said_in_words(sync: tuple[Run, httpx.Client], user: User,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    run, _c = sync
    base = [str(run.root), "--url", run.url, "--folder", "Notes"]
    monkeypatch.delenv("LEV_TOKEN", raising=False)
    assert command.main(base) == 2 and "no token: pass --token or set LEV_TOKEN" in capsys.readouterr().err
    assert command.main([*base, "--token", "lev_not_a_real_token"]) == 2
    assert "HTTP 401" in capsys.readouterr().err
    scoped = user.token(write=True, folders=[user.folder("Only")])
    assert command.main([*base, "--token", scoped]) == 2
    assert "whole-library token" in capsys.readouterr().err
    assert command.main([str(run.root / "missing"), "--url", run.url, "--folder", "Notes", "--token", "x"]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert command.main([*base[:-1], "../up", "--token", "x"]) == 2
    assert "--folder is a relative path" in capsys.readouterr().err


def test_the_progress_line_is_drawn_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        p = Progress(stream)
        p.show("lev sync: sending 1/2 a.md")
        p.show("lev sync: sending 2/2 b.md")
        p.done()
    assert tty.getvalue().startswith("\rlev sync: sending 1/2 a.md\rlev sync: sending 2/2 b.md")
    assert pipe.getvalue() == ""


def test_the_command_starts_without_the_servers_modules(sync: tuple[Run, httpx.Client]) -> None:
    """`lev sync` through its front door (lev.launch, the console script) in a subprocess, LEV_TOKEN from the
    environment; what it imported of Lev's is the small client alone."""
    run, c = sync
    probe = ("import runpy, sys; sys.argv = ['lev'] + sys.argv[1:]\n"
             "try:\n    runpy.run_module('lev.launch', run_name='__main__')\n"
             "except SystemExit as e:\n"
             "    print(sorted(m for m in sys.modules if m.startswith('lev')), file=sys.stderr); raise\n")
    r = subprocess.run([sys.executable, "-c", probe, "sync", str(run.root), "--url", run.url, "--folder", "Notes"],
                       env={**os.environ, "LEV_TOKEN": run.token}, capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "lev sync: 3 added, 0 updated, 0 unchanged, 0 deleted, 1 skipped, 0 failed"
    loaded = eval(r.stderr.strip().splitlines()[-1])  # noqa: S307  (our own probe's list of names)
    assert not [m for m in loaded if not m.startswith(("lev.sync", "lev.core.mimes", "lev.core.sourcepath",
                                                       "lev.core.packagedata", "lev.core.steps", "lev.launch"))
                and m not in ("lev", "lev.core")], loaded
    assert len(kept(c)) == 3
