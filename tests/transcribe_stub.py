"""A loopback stand-in for the OpenAI `POST /v1/audio/transcriptions` API, used by the live server in tests.

Behaviour is scripted per uploaded filename: `plan(filename, [500, 200])` answers 500 to the first request
for that file and succeeds on the second; `text(filename, "...")` sets the transcript. Unscripted files get
200 with a default transcript. Every request is recorded in `requests` (filename, bytes, model, status).
"""

from __future__ import annotations

import io
import json
import threading
import time
import wave
from email.parser import BytesParser
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _parse_multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    msg = BytesParser(policy=default_policy).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    out: dict[str, tuple[str | None, bytes]] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        out[str(name)] = (part.get_filename(), payload)
    return out


def _wav_seconds(data: bytes) -> float | None:
    try:
        with wave.open(io.BytesIO(data)) as w:
            return w.getnframes() / float(w.getframerate())
    except (wave.Error, EOFError):
        return None


class TranscribeStub:
    """ThreadingHTTPServer on 127.0.0.1; `url` is the API base to pass as LEV_TRANSCRIBE_URL (ends in /v1)."""

    def __init__(self) -> None:
        self.plans: dict[str, list[int]] = {}
        self.texts: dict[str, str] = {}
        self.delays: dict[str, float] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.path != "/v1/audio/transcriptions":
                    self._send(404, {"error": {"message": "not found"}})
                    return
                fields = _parse_multipart(self.headers.get("Content-Type", ""), body)
                filename, data = fields.get("file", (None, b""))
                model = fields.get("model", (None, b""))[1].decode()
                with stub.lock:
                    plan = stub.plans.get(filename or "", [])
                    status = plan.pop(0) if plan else 200
                    stub.requests.append({"filename": filename, "bytes": len(data), "model": model,
                                          "status": status, "auth": self.headers.get("Authorization")})
                    text = stub.texts.get(filename or "", f"Transcript of {filename}: a talk about lighthouse "
                                                          "keepers and the tides of the northern sea.")
                pause = stub.delays.get(filename or "", 0.0)
                if pause:
                    time.sleep(pause)
                if status == 429:
                    self._send(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "1"})
                elif status >= 400:
                    self._send(status, {"error": {"message": f"stand-in error {status}"}})
                else:
                    seconds = _wav_seconds(data)
                    self._send(200, {"text": text, "language": "english", "duration": seconds,
                                     "segments": [{"start": 0.0, "end": seconds or 1.0, "text": text}]})

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def plan(self, filename: str, statuses: list[int]) -> None:
        with self.lock:
            self.plans[filename] = list(statuses)

    def text(self, filename: str, text: str) -> None:
        with self.lock:
            self.texts[filename] = text

    def delay(self, filename: str, seconds: float) -> None:
        """Answer requests for `filename` only after `seconds` (a slow provider)."""
        with self.lock:
            self.delays[filename] = seconds

    def calls(self, filename: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["filename"] == filename]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
