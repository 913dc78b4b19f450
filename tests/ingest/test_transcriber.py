"""OpenAI-compatible transcription adapter against a loopback stand-in of the provider."""

from __future__ import annotations

import email.parser
import email.policy
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lev.core.settings import get_settings
from lev.providers.transcriber import OpenAITranscriber, TranscriptionError, transcriber_from

try:
    from tests import fixtures_media as fm
except ImportError:  # tests/ is not a package: pytest puts it on sys.path
    import fixtures_media as fm  # type: ignore[no-redef]

API_KEY = "sk-test-123"
VERBOSE = {
    "task": "transcribe", "language": "english", "duration": 2.0, "text": " Hello from the stand-in. ",
    "segments": [{"id": 0, "start": 0.0, "end": 2.0, "text": " Hello from the stand-in.", "tokens": [1, 2]}],
}


class Provider:
    """Scripted responses; records each request's headers and multipart fields."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, str], bytes]] = []
        self.requests: list[dict[str, Any]] = []

    def reset(self, *responses: tuple[int, dict[str, str], Any]) -> None:
        self.requests.clear()
        self.script = [(s, h, b if isinstance(b, bytes) else json.dumps(b).encode()) for s, h, b in responses]


def make_handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            raw = f"Content-Type: {self.headers.get('content-type')}\r\n\r\n".encode() + body
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
            fields: dict[str, Any] = {}
            if msg.is_multipart():
                for part in msg.iter_parts():
                    name = part.get_param("name", header="content-disposition")
                    fields[name] = {"filename": part.get_filename(), "type": part.get_content_type(),
                                    "data": part.get_payload(decode=True)}
            provider.requests.append({"path": self.path, "auth": self.headers.get("authorization"),
                                      "fields": fields})
            status, headers, payload = provider.script.pop(0) if provider.script else (500, {}, b"no script")
            if self.path != "/v1/audio/transcriptions":
                status, headers, payload = 404, {}, b'{"error": "wrong path"}'
            self.send_response(status)
            self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture(scope="module")
def provider() -> Iterator[tuple[Provider, str]]:
    prov = Provider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(prov))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield prov, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fm.make_wav(tmp_path_factory.mktemp("tr") / "tone.wav")


def client(base: str, **kw: Any) -> OpenAITranscriber:
    kw.setdefault("backoff_base", 0.01)
    return OpenAITranscriber(base, API_KEY, "whisper-test", **kw)


async def test_verbose_json_success(provider: tuple[Provider, str], wav: Path) -> None:
    prov, base = provider
    prov.reset((200, {}, VERBOSE))
    result = await client(base + "/").transcribe(wav, "audio/wav", "tone.wav")
    assert result.text == "Hello from the stand-in."
    assert result.duration_sec == 2.0 and result.language == "english"
    assert result.segments == [{"start": 0.0, "end": 2.0, "text": "Hello from the stand-in."}]
    (req,) = prov.requests
    assert req["auth"] == f"Bearer {API_KEY}"
    fields = req["fields"]
    assert fields["file"]["filename"] == "tone.wav" and fields["file"]["type"] == "audio/wav"
    assert fields["file"]["data"] == fm.file_bytes(wav)
    assert fields["model"]["data"] == b"whisper-test"
    assert fields["response_format"]["data"] == b"verbose_json"


async def test_plain_json_and_no_key(provider: tuple[Provider, str], wav: Path) -> None:
    prov, base = provider
    prov.reset((200, {}, {"text": "just text"}))
    result = await OpenAITranscriber(base, None, "m").transcribe(wav, "audio/wav", "a.wav")
    assert (result.text, result.duration_sec, result.language) == ("just text", None, None)
    assert result.segments == []
    assert prov.requests[0]["auth"] is None


async def test_500_then_success_is_retried(provider: tuple[Provider, str], wav: Path) -> None:
    prov, base = provider
    prov.reset((500, {}, b"boom"), (200, {}, VERBOSE))
    result = await client(base).transcribe(wav, "audio/wav", "tone.wav")
    assert result.text == "Hello from the stand-in."
    assert len(prov.requests) == 2
    assert prov.requests[1]["fields"]["file"]["data"] == fm.file_bytes(wav)  # a retry re-sends the whole file


async def test_429_honours_retry_after(provider: tuple[Provider, str], wav: Path) -> None:
    prov, base = provider
    prov.reset((429, {"Retry-After": "0"}, {"error": "slow down"}), (200, {}, VERBOSE))
    start = time.perf_counter()
    # a 30 s exponential backoff would time the test out: Retry-After: 0 must win (a deadline well under 30 s)
    result = await client(base, backoff_base=30).transcribe(wav, "audio/wav", "tone.wav")
    assert time.perf_counter() - start < 20
    assert result.text == "Hello from the stand-in." and len(prov.requests) == 2


async def test_400_fails_at_once(provider: tuple[Provider, str], wav: Path) -> None:
    prov, base = provider
    prov.reset((400, {}, {"error": {"message": "bad audio"}}), (200, {}, VERBOSE))
    with pytest.raises(TranscriptionError) as exc:
        await client(base).transcribe(wav, "audio/wav", "tone.wav")
    assert "400" in str(exc.value) and "bad audio" in str(exc.value)
    assert exc.value.retryable is False
    assert len(prov.requests) == 1


async def test_persistent_5xx_gives_up_after_four_attempts(provider: tuple[Provider, str], wav: Path) -> None:
    prov, base = provider
    prov.reset(*[(503, {}, b"down")] * 6)
    with pytest.raises(TranscriptionError) as exc:
        await client(base).transcribe(wav, "audio/wav", "tone.wav")
    assert exc.value.retryable is True
    assert len(prov.requests) == 4


async def test_connection_refused_is_retried_then_fails(wav: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TranscriptionError) as exc:
        await client(f"http://127.0.0.1:{port}/v1").transcribe(wav, "audio/wav", "tone.wav")
    assert exc.value.retryable is True and "4 attempts" in str(exc.value)


def test_transcriber_from_follows_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        monkeypatch.delenv("LEV_TRANSCRIBE_URL", raising=False)
        get_settings.cache_clear()
        assert transcriber_from(get_settings()) is None
        monkeypatch.setenv("LEV_TRANSCRIBE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.setenv("LEV_TRANSCRIBE_MODEL", "whisper-large")
        get_settings.cache_clear()
        t = transcriber_from(get_settings())
        assert isinstance(t, OpenAITranscriber)
        assert t.url == "http://127.0.0.1:9/v1/audio/transcriptions" and t.model == "whisper-large"
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
