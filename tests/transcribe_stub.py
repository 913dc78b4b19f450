"""A loopback stand-in for the OpenAI `POST /v1/audio/transcriptions` API, used by the live server in tests.

It answers like the real API: `response_format` json (the default: `{text}`), text, srt, vtt or verbose_json
(`{task, language, duration, text, segments: [{id, seek, start, end, text, tokens, temperature, avg_logprob,
compression_ratio, no_speech_prob}]}`, segment texts with their leading space), and 400
`invalid_request_error` for another format or a missing file or model.

Behaviour is scripted per uploaded filename: `plan(filename, [500, 200])` answers 500 to the first request
for that file and succeeds on the second; `text(filename, "...")` sets the transcript (its sentences become
segments spread evenly over the recording); `segments(filename, [(start, end, text), ...])` sets timed
segments. Unscripted files get 200 with a default transcript. Every request is recorded in `requests`
(filename, bytes, model, response format, status).
"""

from __future__ import annotations

import io
import json
import re
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


def _stamp(seconds: float, sep: str) -> str:
    ms = int(round(seconds * 1000))
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"


def _even_segments(text: str, seconds: float) -> list[tuple[float, float, str]]:
    """A transcript's sentences spread evenly over the recording (what a scripted text is timed as)."""
    sentences = [p for p in re.split(r"(?<=[.!?])\s+", text.strip()) if p] or [text]
    step = seconds / len(sentences)
    return [(round(i * step, 2), round((i + 1) * step, 2), p) for i, p in enumerate(sentences)]


def render(fmt: str, text: str, seconds: float, segments: list[tuple[float, float, str]]) -> tuple[str, bytes]:
    """The body of a successful answer in `fmt`, as the real API writes it: (content type, bytes)."""
    if fmt == "text":
        return "text/plain; charset=utf-8", (text + "\n").encode()
    if fmt in ("srt", "vtt"):
        sep = "," if fmt == "srt" else "."
        cues = [(f"{i + 1}\n" if fmt == "srt" else "") + f"{_stamp(a, sep)} --> {_stamp(b, sep)}\n{t}\n"
                for i, (a, b, t) in enumerate(segments)]
        head = "WEBVTT\n\n" if fmt == "vtt" else ""
        return "text/plain; charset=utf-8", (head + "\n".join(cues)).encode()
    if fmt == "verbose_json":
        segs = [{"id": i, "seek": int(a * 100) // 3000 * 3000, "start": a, "end": b, "text": " " + t,
                 "tokens": [50364 + i, 440, 50464], "temperature": 0.0, "avg_logprob": -0.25,
                 "compression_ratio": 1.3, "no_speech_prob": 0.01}
                for i, (a, b, t) in enumerate(segments)]
        body = {"task": "transcribe", "language": "english", "duration": seconds, "text": text, "segments": segs}
        return "application/json", json.dumps(body).encode()
    return "application/json", json.dumps({"text": text}).encode()


FORMATS = ("json", "text", "srt", "vtt", "verbose_json")


class TranscribeStub:
    """ThreadingHTTPServer on 127.0.0.1; `url` is the API base to pass as LEV_TRANSCRIBE_URL (ends in /v1)."""

    def __init__(self) -> None:
        self.plans: dict[str, list[int]] = {}
        self.texts: dict[str, str] = {}
        self.timed: dict[str, list[tuple[float, float, str]]] = {}
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
                fmt = fields.get("response_format", (None, b"json"))[1].decode() or "json"
                with stub.lock:
                    plan = stub.plans.get(filename or "", [])
                    status = plan.pop(0) if plan else 200
                    stub.requests.append({"filename": filename, "bytes": len(data), "model": model,
                                          "response_format": fmt, "status": status,
                                          "auth": self.headers.get("Authorization")})
                    text = stub.texts.get(filename or "", f"Transcript of {filename}: a talk about lighthouse "
                                                          "keepers and the tides of the northern sea.")
                    timed = stub.timed.get(filename or "")
                pause = stub.delays.get(filename or "", 0.0)
                if pause:
                    time.sleep(pause)
                if not data or not model or fmt not in FORMATS:
                    why = ("'file' is required" if not data else "'model' is required" if not model
                           else f"'{fmt}' is not one of {list(FORMATS)} - 'response_format'")
                    self._send(400, {"error": {"message": why, "type": "invalid_request_error",
                                               "param": None, "code": None}})
                elif status == 429:
                    self._send(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "1"})
                elif status >= 400:
                    self._send(status, {"error": {"message": f"stand-in error {status}"}})
                else:
                    seconds = _wav_seconds(data) or 1.0
                    if timed:
                        text = " ".join(t for _, _, t in timed)
                    segments = timed or _even_segments(text, seconds)
                    ctype, raw = render(fmt, text, seconds, segments)
                    self._send_raw(200, raw, ctype)

            def _send_raw(self, status: int, raw: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

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

    def segments(self, filename: str, timed: list[tuple[float, float, str]]) -> None:
        """Answer `filename` with these (start, end, text) segments; the transcript is their texts."""
        with self.lock:
            self.timed[filename] = list(timed)

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
