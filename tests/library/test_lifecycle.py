"""An item's life (store/lifecycle.py): every kind walked through its states, failures included, and the one
place every reader (ingest answers, API progress, pages, jobs, the store's queries) takes them from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lev.store import lifecycle
from lev.store.lifecycle import Event, IllegalMove, Phase, State, Status, Transcription

ROOT = Path(__file__).resolve().parents[2]

# kind -> (stored in the request?, transcribed?)
KINDS = {"text": False, "url": False, "pdf": False, "image": False, "audio": True, "video": True, "youtube": True}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_from_queued_to_ready_and_to_failed(kind: str) -> None:
    media = KINDS[kind]
    queued = lifecycle.start(kind, ready=False)
    assert queued.phase is (Phase.TRANSCRIBING if media else Phase.PROCESSING)
    assert queued.moving
    assert queued.columns() == {"status": "processing", "transcription_status": "pending" if media else "not_required"}

    ready = lifecycle.advance(queued, Event.FINISHED)
    assert ready.phase is Phase.READY and not ready.moving
    assert ready.columns() == {"status": "ready", "transcription_status": "done" if media else "not_required"}

    failed = lifecycle.advance(queued, Event.FAILED)
    assert failed.phase is Phase.FAILED and not failed.moving
    assert failed.columns() == {"status": "failed", "transcription_status": "failed" if media else "not_required"}

    for end in (ready, failed):
        for event in Event:
            with pytest.raises(IllegalMove):
                lifecycle.advance(end, event)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_stored_ready_in_the_request(kind: str) -> None:
    """Text, pages and documents read in the request, and YouTube with captions, are born ready."""
    state = lifecycle.start(kind, ready=True)
    assert state.phase is Phase.READY
    assert state.transcription is (Transcription.DONE if KINDS[kind] else Transcription.NOT_REQUIRED)


def test_a_failed_transcription_is_failed_not_transcribing() -> None:
    """What the old derivation got wrong: a media item whose transcription failed answered `transcribing`."""
    assert lifecycle.phase("failed", "failed") == "failed"
    assert lifecycle.of_row("processing", "pending").phase is Phase.TRANSCRIBING
    assert lifecycle.of_row("processing", "not_required").phase is Phase.PROCESSING


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("status", ["processing", "ready", "failed"])
def test_an_item_joining_a_shared_content_takes_its_state(kind: str, status: str) -> None:
    state = lifecycle.of_content(kind, status)
    assert state.status is Status(status)
    assert state.phase is {("processing", True): Phase.TRANSCRIBING, ("processing", False): Phase.PROCESSING,
                           ("ready", True): Phase.READY, ("ready", False): Phase.READY,
                           ("failed", True): Phase.FAILED, ("failed", False): Phase.FAILED}[(status, KINDS[kind])]


def test_unknown_stored_values_are_refused() -> None:
    with pytest.raises(ValueError):
        lifecycle.of_row("transcribing", "pending")
    assert State(Status.READY, Transcription.DONE) == lifecycle.of_row("ready", "done")


_VALUES = "processing|ready|failed|pending|done|not_required"
_COLUMN = r"(?:user_items|contents)\.c\.(?:status|transcription_status)"
_STATE = "(?:status|transcription_status)"
_FIELD = rf"""(?:item|items?|i|row|it)(?:\[["']{_STATE}["']\]|\.{_STATE})"""
DERIVATION = re.compile(rf"""(?:{_COLUMN}|{_FIELD}|transcription_status)\s*[!=]=\s*["']({_VALUES})["']""")


def test_no_reader_derives_states_itself() -> None:
    """Item and content states are compared in the lifecycle module only: pages, templates, jobs, the library and
    the store ask it (`life(item)` in templates, `lifecycle.of_row`, `Status.*` elsewhere). Other things with a
    status of their own (imports, feeds, webhook deliveries) are not items."""
    literal = DERIVATION
    offenders = []
    for folder in ("lev", "web/templates"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in (".py", ".html") or path.name == "lifecycle.py" or "migrations" in path.parts:
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if literal.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, offenders


def test_the_state_check_sees_a_derivation() -> None:
    """The check itself: the old derivations it must catch."""
    literal = DERIVATION
    for line in ('if item["status"] == "processing" or item["transcription_status"] == "pending":',
                 '{% if item.status == "ready" %}', '.where(user_items.c.transcription_status == "pending")',
                 'if row["status"] != "processing":'):
        assert literal.search(line), line
    assert not literal.search('if r["status"] == "pending"  # a webhook delivery')


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_refused_link_is_a_new_item_that_failed(kind: str) -> None:
    refused = lifecycle.refused(kind)
    assert refused == lifecycle.advance(lifecycle.start(kind, ready=False), Event.FAILED)
    assert refused.phase is Phase.FAILED


_WRITES = re.compile(r"""lifecycle\.State\(|\bState\(Status\.|"""
                     r"""(?<![=!<>])=\s*(?:lifecycle\.)?(?:Status|Transcription)\.|["']status["']\s*:\s*(?:lifecycle\.)?Status\.""")
_RECORDINGS = re.compile(r"""["'](?:audio|video)["']\s*,\s*["'](?:audio|video)["']""")


def _lev_lines() -> list[tuple[str, int, str]]:
    out = []
    for path in sorted((ROOT / "lev").rglob("*.py")):
        if path.name == "lifecycle.py" or "migrations" in path.parts:
            continue
        out += [(str(path.relative_to(ROOT)), n, line) for n, line in enumerate(path.read_text().splitlines(), 1)]
    return out


def test_every_state_change_comes_from_the_lifecycle() -> None:
    """No module builds a state or writes a status value by hand: the states written are those `start`,
    `advance`, `of_content` and `refused` return (`State.columns()`, `state.status`)."""
    offenders = [f"{p}:{n}: {line.strip()}" for p, n, line in _lev_lines() if _WRITES.search(line)]
    assert not offenders, offenders
    assert _WRITES.search("failed = lifecycle.State(lifecycle.Status.FAILED, lifecycle.Transcription.NOT_REQUIRED)")
    assert _WRITES.search('await item_store.set_items_of_content(s, c, **{"status": Status.READY, "error": None})')
    assert _WRITES.search("    ready = lifecycle.Status.READY.value")
    assert not _WRITES.search('if row["status"] != lifecycle.Status.PROCESSING:')


def test_the_recordings_are_named_once() -> None:
    """Audio and video, the kinds transcribed from a file, are `lifecycle.RECORDINGS`; nowhere else a pair."""
    assert lifecycle.RECORDINGS == {"audio", "video"} and lifecycle.RECORDINGS < lifecycle.MEDIA_KINDS
    offenders = [f"{p}:{n}: {line.strip()}" for p, n, line in _lev_lines()
                 if _RECORDINGS.search(line) and "Literal[" not in line]  # the media classes' type names all three
    assert not offenders, offenders
