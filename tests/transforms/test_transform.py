"""lev.transforms.service: the local extractive transformer and the chat adapter (stand-in on 127.0.0.1)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lev.core.settings import get_settings
from lev.embedding.embedder import LocalEmbedder
from lev.transforms.service import (
    LLM_TEXT_BUDGET,
    LocalTransformer,
    OpenAIChatTransformer,
    TransformError,
    parse_llm_reply,
    split_sentences,
    transformer_from,
)

LOCAL = LocalEmbedder()  # loads its model at the first embedding

TEXT = """Coral reefs are among the most diverse ecosystems on Earth. They cover less than one percent of \
the ocean floor, yet they support about a quarter of all marine species. Reef-building corals live in a \
symbiotic relationship with microscopic algae called zooxanthellae, which provide them with food through \
photosynthesis.

When ocean temperatures rise, corals expel their algae and turn white, a process known as coral \
bleaching. Bleached corals are not dead, but they are under severe stress and may starve if warm \
conditions persist. Mass bleaching events have become more frequent as climate change warms the seas.

Ocean acidification adds another threat. As the ocean absorbs carbon dioxide from the atmosphere, \
seawater becomes more acidic, making it harder for corals to build their calcium carbonate skeletons. \
Pollution, overfishing and coastal development further weaken reef ecosystems.

Scientists are testing ways to help reefs survive. Some teams breed heat-tolerant corals in nurseries \
and transplant them onto damaged reefs. Others study which coral species recover fastest after \
bleaching. Protecting reefs from local stressors such as runoff and destructive fishing gives them a \
better chance to recover.

Healthy reefs also protect coastlines from storms and waves, and they support fisheries and tourism \
that millions of people depend on. The economic value of coral reefs is estimated at billions of \
dollars each year."""


class ChatStandIn:
    """POST /v1/chat/completions answering `replies` in order: an int is an HTTP error status,
    a str is the assistant message content."""

    def __init__(self, replies: list[int | str]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                stand_in.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": json.loads(raw)}
                )
                reply = stand_in.replies.pop(0)
                if isinstance(reply, int):
                    self.send(reply, {"error": {"message": "boom"}})
                else:
                    self.send(200, {
                        "id": "chatcmpl-1", "object": "chat.completion",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply}}],
                    })

            def send(self, code: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _norm(s: str) -> str:
    return " ".join(s.split())


@pytest.mark.asyncio
async def test_local_transformer_summary_and_key_phrases() -> None:
    outputs = await LocalTransformer(LOCAL).transform("Coral reefs", TEXT)
    by_kind = {o.kind: o for o in outputs}
    assert set(by_kind) == {"summary", "key_phrases"}
    assert all(o.generator == "lev-local-extractive (all-MiniLM-L6-v2)" for o in outputs)

    summary = by_kind["summary"].content
    assert isinstance(summary, str)
    sentences = split_sentences(TEXT)
    picked = [s for s in sentences if s in summary]
    assert 3 <= len(picked) <= 5
    assert _norm(" ".join(picked)) == _norm(summary)  # only whole sentences from the text...
    positions = [sentences.index(s) for s in picked]
    assert positions == sorted(positions)  # ...kept in their original order

    phrases = by_kind["key_phrases"].content
    assert isinstance(phrases, list) and len(phrases) == 8
    assert len({p.lower() for p in phrases}) == 8
    lowered = TEXT.lower()
    for p in phrases:
        assert 1 <= len(p.split()) <= 3 and p.lower() in _norm(lowered)
    assert any(w in " ".join(phrases).lower() for w in ("coral", "reef", "bleach"))


@pytest.mark.asyncio
async def test_local_transformer_empty_text() -> None:
    assert await LocalTransformer(LOCAL).transform(None, "  ") == []


@pytest.mark.asyncio
async def test_chat_adapter_retries_500_and_parses_json() -> None:
    reply = (
        '```json\n{"summary": "Reefs are diverse and threatened.", '
        '"key_phrases": ["coral bleaching", "ocean acidification"]}\n```'
    )
    s = ChatStandIn([500, reply])
    try:
        tr = OpenAIChatTransformer(s.base, "sk-llm", "tiny-model", backoff=0.01)
        outputs = await tr.transform("Coral reefs", TEXT)
    finally:
        s.close()
    assert len(s.requests) == 2
    req = s.requests[-1]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-llm"
    body = req["body"]
    assert body["model"] == "tiny-model" and isinstance(body["temperature"], (int, float))
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"]
    user = body["messages"][1]["content"]
    assert "Coral reefs" in user and "zooxanthellae" in user
    assert [(o.kind, o.content, o.generator) for o in outputs] == [
        ("summary", "Reefs are diverse and threatened.", "openai-compatible:tiny-model"),
        ("key_phrases", ["coral bleaching", "ocean acidification"], "openai-compatible:tiny-model"),
    ]


@pytest.mark.asyncio
async def test_chat_adapter_plain_text_fallback_and_truncation() -> None:
    s = ChatStandIn(["Just a plain summary, no JSON."])
    long_text = (TEXT + "\n\n") * 40
    assert len(long_text) > LLM_TEXT_BUDGET
    try:
        outputs = await OpenAIChatTransformer(s.base, None, "m", backoff=0.01).transform(None, long_text)
    finally:
        s.close()
    assert [(o.kind, o.content) for o in outputs] == [("summary", "Just a plain summary, no JSON.")]
    sent = s.requests[0]["body"]["messages"][1]["content"]
    assert len(sent) <= LLM_TEXT_BUDGET
    assert s.requests[0]["auth"] is None


@pytest.mark.asyncio
async def test_chat_adapter_gives_up() -> None:
    s = ChatStandIn([503, 503, 429, 500])
    try:
        with pytest.raises(TransformError):
            await OpenAIChatTransformer(s.base, None, "m", backoff=0.01).transform("t", TEXT)
        assert len(s.requests) == 4
    finally:
        s.close()


def test_parse_llm_reply_variants() -> None:
    chatty = 'Sure! {"summary": "S.", "key_phrases": ["a", 3, " b "]} Done.'
    assert parse_llm_reply(chatty) == ("S.", ["a", "b"])
    assert parse_llm_reply('{"summary": "", "key_phrases": []}') == ('{"summary": "", "key_phrases": []}', [])
    assert parse_llm_reply("{not json}") == ("{not json}", [])


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_transformer_choice(llm_env: pytest.MonkeyPatch) -> None:
    llm_env.delenv("LEV_LLM_URL", raising=False)
    local = transformer_from(get_settings(), LOCAL)
    assert isinstance(local, LocalTransformer) and local.embedder is LOCAL  # the embedder it was handed
    llm_env.setenv("LEV_LLM_URL", "http://127.0.0.1:9/v1")
    llm_env.setenv("LEV_LLM_MODEL", "llama3")
    get_settings.cache_clear()
    tr = transformer_from(get_settings(), LOCAL)
    assert isinstance(tr, OpenAIChatTransformer) and tr.generator == "openai-compatible:llama3"
