"""An item's life, in one place: the states stored in `contents.status`, `user_items.status` and
`user_items.transcription_status`, what a person is shown of them (the phase), and the moves between them.

Every reader uses this module: the ingest answer, the API and the pages (phase, whether it is still moving), the
jobs (which states a job may finish or fail), the store's queries (the values they filter on).

    processing ──finished──▶ ready            (text, pages, documents: chunked and embedded)
    transcribing ──finished──▶ ready         (audio, video, YouTube: transcript stored and embedded)
    processing | transcribing ──failed──▶ failed
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    """`contents.status` and `user_items.status`: searchable when ready."""

    PROCESSING = "processing"
    READY = "ready"
    FAILED = "failed"


class Transcription(StrEnum):
    """`user_items.transcription_status`."""

    NOT_REQUIRED = "not_required"
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


class Phase(StrEnum):
    """What a person (or an ingest answer) is told of an item."""

    PROCESSING = "processing"
    TRANSCRIBING = "transcribing"
    READY = "ready"
    FAILED = "failed"


class Event(StrEnum):
    FINISHED = "finished"  # its text is chunked and embedded (a transcript stored first, for media)
    FAILED = "failed"  # extraction, transcription or embedding gave up


RECORDINGS = frozenset({"audio", "video"})  # the media classes (and item kinds) of a file that is transcribed
MEDIA_KINDS = RECORDINGS | {"youtube"}  # the kinds whose item has a transcript


class IllegalMove(ValueError):
    """A move the lifecycle does not have (e.g. finishing an item that failed)."""


@dataclass(frozen=True)
class State:
    """An item's stored state."""

    status: Status
    transcription: Transcription

    @property
    def phase(self) -> Phase:
        if self.status is Status.FAILED:
            return Phase.FAILED
        if self.status is Status.READY:
            return Phase.READY
        return Phase.TRANSCRIBING if self.transcription is Transcription.PENDING else Phase.PROCESSING

    @property
    def moving(self) -> bool:
        """Still on its way (a page polls it; the reconciler may re-queue its job)."""
        return self.phase in (Phase.PROCESSING, Phase.TRANSCRIBING)

    @property
    def transcribed(self) -> bool:
        """A recording: its transcript has a state of its own (pending, done, failed)."""
        return self.transcription is not Transcription.NOT_REQUIRED

    def columns(self) -> dict[str, str]:
        """The user item's columns for this state."""
        return {"status": self.status.value, "transcription_status": self.transcription.value}


_MOVES: dict[tuple[Phase, Event], Phase] = {
    (Phase.PROCESSING, Event.FINISHED): Phase.READY,
    (Phase.TRANSCRIBING, Event.FINISHED): Phase.READY,
    (Phase.PROCESSING, Event.FAILED): Phase.FAILED,
    (Phase.TRANSCRIBING, Event.FAILED): Phase.FAILED,
}


def start(kind: str, *, ready: bool) -> State:
    """A new item: ready when its chunks were embedded in the request, else waiting for a job. Audio, video and
    YouTube have a transcript: done when it came with the item (captions), else pending."""
    status = Status.READY if ready else Status.PROCESSING
    if kind not in MEDIA_KINDS:
        return State(status, Transcription.NOT_REQUIRED)
    return State(status, Transcription.DONE if ready else Transcription.PENDING)



def refused(kind: str) -> State:
    """A link that could not be ingested at all, kept as a failed item that says why: a new item that failed."""
    return advance(start(kind, ready=False), Event.FAILED)


def advance(state: State, event: Event) -> State:
    """The state after `event`; IllegalMove for a move the lifecycle does not have."""
    target = _MOVES.get((state.phase, event))
    if target is None:
        raise IllegalMove(f"an item that is {state.phase} cannot become {event}")
    if target is Phase.READY:
        return State(Status.READY, Transcription.DONE if state.transcribed else Transcription.NOT_REQUIRED)
    return State(Status.FAILED, Transcription.FAILED if state.transcribed else Transcription.NOT_REQUIRED)


def of_row(status: str, transcription_status: str) -> State:
    """The state of a stored item row."""
    return State(Status(status), Transcription(transcription_status))


def of_content(kind: str, content_status: str) -> State:
    """The state of the items of a content of `kind` (a new item on someone's content joins it in this state):
    the content's status, and on media a transcript that follows it."""
    status = Status(content_status)
    if kind not in MEDIA_KINDS:
        return State(status, Transcription.NOT_REQUIRED)
    return State(status, {Status.READY: Transcription.DONE, Status.PROCESSING: Transcription.PENDING,
                          Status.FAILED: Transcription.FAILED}[status])


def phase(status: str, transcription_status: str) -> str:
    """The phase of a stored item row, as a string (templates and JSON)."""
    return of_row(status, transcription_status).phase.value
