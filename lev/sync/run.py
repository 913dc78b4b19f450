"""One sync of a folder into a Lev folder, and the watch that repeats it as files change.

A run compares the folder's files (their SHA-256, `lev.sync.tree`) with what the library keeps under the folder's
name (GET /api/v1/source-files): a file the library lacks or holds other bytes of is sent (a new item, or its item
updated in place), `--delete` removes the items whose file is gone; a run over an unchanged folder sends nothing
but that listing. Interrupted, the next run takes up where it stopped: what was sent is listed as kept."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from lev.core import sourcepath
from lev.sync.client import Client, FileRefused, Remote
from lev.sync.tree import LocalFile, State, scan

WATCH_DEBOUNCE_MS = 800


@dataclass
class Summary:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: int = 0  # files of types Lev keeps not, or refused by the server (now or before, same bytes)
    failed: list[str] = field(default_factory=list)  # "path: why"

    def line(self) -> str:
        return (f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, {self.deleted} deleted, "
                f"{self.skipped} skipped, {len(self.failed)} failed")


class Progress:
    """One line on a terminal, rewritten as the run goes; nothing when the stream is no terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.width = 0

    def show(self, text: str) -> None:
        if self.live:
            text = text[:119]
            self.stream.write("\r" + text.ljust(self.width))
            self.stream.flush()
            self.width = len(text)

    def done(self) -> None:
        if self.live and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


@dataclass
class Sync:
    client: Client
    root: Path
    folder: str
    delete: bool = False
    state: State = field(default_factory=lambda: State(None))
    progress: Progress = field(default_factory=lambda: Progress(sys.stderr))
    warn: Callable[[str], None] = field(default=lambda line: print(f"lev sync: {line}", file=sys.stderr))

    def once(self) -> Summary:
        """Make the library's folder hold what the local folder holds; the counts of what was done."""
        out = Summary()
        self.progress.show(f"lev sync: reading {self.root}")
        found = scan(self.root)
        out.skipped += found.skipped
        self.progress.show("lev sync: listing what the library keeps")
        prefix = f"{self.folder}/"
        remote = {r.path: r for r in self.client.files(prefix)}
        todo: list[tuple[LocalFile, str, Remote | None]] = []
        for n, f in enumerate(found.files.values(), 1):
            at = prefix + f.rel
            if sourcepath.problem(at) is not None:
                out.skipped += 1
                continue
            self.progress.show(f"lev sync: hashing {n}/{len(found.files)} {f.rel}")
            sha = self.state.sha256(f)
            kept = remote.get(at)
            if kept is not None and kept.sha256 == sha:
                out.unchanged += 1
            elif self.state.refused(f, sha) is not None:
                out.skipped += 1
            else:
                todo.append((f, sha, kept))
        for n, (f, _sha, kept) in enumerate(todo, 1):
            self.progress.show(f"lev sync: sending {n}/{len(todo)} {f.rel} ({out.line()})")
            self._send(f, kept, out)
        if self.delete:
            gone = [r for at, r in remote.items() if at[len(prefix):] not in found.present]
            for n, r in enumerate(gone, 1):
                self.progress.show(f"lev sync: deleting {n}/{len(gone)} {r.path}")
                self.client.delete_item(r.item_id)
                out.deleted += 1
        self.state.save(found.present)
        self.progress.done()
        return out

    def _send(self, f: LocalFile, kept: Remote | None, out: Summary) -> None:
        try:
            answer = self.client.upload(f.path, mime=f.mime, source_path=f"{self.folder}/{f.rel}")
        except FileRefused as exc:
            self.progress.done()
            if exc.code in ("unsupported_media_type", "file_too_large"):
                self.warn(f"{f.rel}: skipped ({exc.message})")
                out.skipped += 1
            else:
                self.warn(f"{f.rel}: {exc.message}")
                out.failed.append(f"{f.rel}: {exc.message}")
            self.state.refuse(f, exc.message)
            return
        except FileNotFoundError:
            return  # removed while the run went on: the next one sees it gone
        self.state.accept(f)
        change = (answer.get("source_file") or {}).get("change")
        if change == "updated" or (change is None and kept is not None):
            out.updated += 1
        elif change == "unchanged":
            out.unchanged += 1
        else:
            out.added += 1
        for lost in (answer.get("source_file") or {}).get("highlights_lost") or []:
            self.progress.done()
            self.warn(f"{f.rel}: a highlight's words are gone from the new text (deleted): {lost['text'][:80]!r}")


def watch(sync: Sync, report: Callable[[Summary], None], stop: threading.Event | None = None) -> None:
    """Sync again whenever files of the folder change (watchfiles: inotify, FSEvents, ReadDirectoryChangesW), until
    `stop` is set or the process is interrupted."""
    import watchfiles  # noqa: PLC0415  (only --watch needs it: the rest of `lev sync` starts without it)

    for changes in watchfiles.watch(sync.root, debounce=WATCH_DEBOUNCE_MS, stop_event=stop, recursive=True,
                                    raise_interrupt=False):
        relevant = [p for _, p in changes if not any(part.startswith(".") for part in
                                                        Path(p).relative_to(sync.root).parts)]
        if relevant:
            report(sync.once())
