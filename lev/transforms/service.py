"""AI transforms ("outputs") of an item: a summary and key phrases.

`LocalTransformer` (default) is extractive and uses only the embedder: the summary is the sentences
closest to the document centroid, the key phrases are n-grams closest to it, diversified with MMR.
`OpenAIChatTransformer` asks an OpenAI-compatible chat completions API (OpenAI, Ollama, vLLM,
llama.cpp) and is chosen when LEV_LLM_URL is set.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import numpy as np

from lev.core.retry import async_retrying
from lev.core.settings import Settings
from lev.plumbing.ports import Embedder
from lev.store.locations import title_prefix
from lev.transforms.stopwords import ENGLISH_STOP_WORDS

MAX_SENTENCES = 160  # sentences embedded for the local summary (evenly sampled beyond this)
MAX_CANDIDATES = 300  # n-gram candidates embedded for key phrases (most frequent first)
KEY_PHRASES = 8
MMR_DIVERSITY = 0.5
LLM_TEXT_BUDGET = 24_000  # characters of item text sent to the chat model (~6k tokens)

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?\u2026\u3002])[\"'\u201d\u2019)\]]*\s+|\n+")
_WORD = re.compile(r"[^\W_](?:[\w'\u2019-]*[^\W_])?")
_PHRASE_BREAK = re.compile(r"[.,;:!?()\[\]{}\"\u201c\u201d\n|/\u2014\u2013]+")


_STOPWORDS = ENGLISH_STOP_WORDS | {"also", "just", "like", "may", "might", "one", "us", "will"}


OutputContent = str | list[str] | dict[str, Any]


@dataclass
class Output:
    kind: str  # "summary" | "key_phrases"
    content: OutputContent  # summary: str; key_phrases: list[str]
    generator: str


class Transformer(Protocol):
    async def transform(self, title: str | None, text: str) -> list[Output]: ...


class TransformError(RuntimeError):
    """The transform provider failed (after retries) or returned nothing usable."""


def split_sentences(text: str) -> list[str]:
    """Sentences (or lines) of `text`, whitespace-normalised, dropping fragments under 3 words."""
    out = []
    for piece in _SENTENCE_SPLIT.split(text):
        sentence = " ".join(piece.split())
        if len(sentence.split()) >= 3:
            out.append(sentence)
    return out


def _candidates(text: str) -> list[str]:
    """1-3 word phrases without stopwords, most frequent first, in their most common spelling."""
    counts: Counter[str] = Counter()
    spelling: dict[str, Counter[str]] = {}
    for segment in _PHRASE_BREAK.split(text):
        words = _WORD.findall(segment)
        for n in (1, 2, 3):
            for i in range(len(words) - n + 1):
                gram = words[i : i + n]
                lowered = [w.lower() for w in gram]
                if any(w in _STOPWORDS or len(w) < 3 or w.isdigit() for w in lowered):
                    continue
                key = " ".join(lowered)
                counts[key] += 1
                spelling.setdefault(key, Counter())[" ".join(gram)] += 1
    # a three-word phrase seen once is usually a clause fragment, not a key phrase
    ranked = [k for k, c in counts.most_common() if c > 1 or k.count(" ") < 2][:MAX_CANDIDATES]
    return [spelling[k].most_common(1)[0][0] for k in ranked]


def frequent_phrases(text: str, limit: int) -> list[str]:
    """The key-phrase candidates of `text` (1-3 words, no stop words), most frequent first: what the local key
    phrases are chosen from, without embedding anything (tag suggestions for an item that was not transformed)."""
    return _candidates(text)[:limit]


def _mmr(doc: np.ndarray, cands: np.ndarray, top: int, diversity: float) -> list[int]:
    relevance = cands @ doc
    chosen = [int(np.argmax(relevance))]
    remaining = [i for i in range(len(cands)) if i != chosen[0]]
    while remaining and len(chosen) < top:
        redundancy = (cands[remaining] @ cands[chosen].T).max(axis=1)
        scores = (1 - diversity) * relevance[remaining] - diversity * redundancy
        best = remaining[int(np.argmax(scores))]
        chosen.append(best)
        remaining.remove(best)
    return chosen


class LocalTransformer:
    """Extractive summary and key phrases from embeddings; no third party involved."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    @property
    def generator(self) -> str:
        name = self.embedder.name.removeprefix("local:")
        return f"lev-local-extractive ({name})"

    async def transform(self, title: str | None, text: str) -> list[Output]:
        return await asyncio.to_thread(self.transform_sync, title, text)

    def transform_sync(self, title: str | None, text: str) -> list[Output]:
        """The blocking implementation (embeds sentences and phrases); the title is not summarised again."""
        sentences = split_sentences(text[title_prefix(text, title):])
        if not sentences:
            return []
        if len(sentences) > MAX_SENTENCES:
            step = len(sentences) / MAX_SENTENCES
            sentences = [sentences[int(i * step)] for i in range(MAX_SENTENCES)]
        vecs = np.asarray(self.embedder.embed(sentences), dtype=np.float32)
        centroid = vecs.mean(axis=0)
        centroid /= np.linalg.norm(centroid) or 1.0
        k = 3 if len(sentences) <= 20 else 4 if len(sentences) <= 60 else 5
        top = sorted(np.argsort(-(vecs @ centroid))[:k].tolist())
        summary = " ".join(sentences[i] for i in top)
        outputs = [Output("summary", summary, self.generator)]

        cands = _candidates(text)
        if cands:
            cvecs = np.asarray(self.embedder.embed(cands), dtype=np.float32)
            picked = _mmr(centroid, cvecs, KEY_PHRASES, MMR_DIVERSITY)
            outputs.append(Output("key_phrases", [cands[i] for i in picked], self.generator))
        return outputs


def truncate_text(text: str, budget: int = LLM_TEXT_BUDGET) -> str:
    """`text` cut to `budget` characters at a paragraph or sentence end when one is near."""
    if len(text) <= budget:
        return text
    cut = text[:budget]
    for sep in ("\n\n", ". ", "\n", " "):
        pos = cut.rfind(sep, int(budget * 0.8))
        if pos > 0:
            return cut[: pos + len(sep)].rstrip()
    return cut


def parse_llm_reply(content: str) -> tuple[str, list[str]]:
    """(summary, key phrases) from a chat reply; JSON if it parses, else the reply is the summary."""
    body = content.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1).strip()
    start, end = body.find("{"), body.rfind("}")
    if start != -1 and end > start:
        try:
            data = json.loads(body[start : end + 1])
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            summary = data.get("summary")
            phrases = data.get("key_phrases") or data.get("keyphrases") or data.get("keywords") or []
            if isinstance(summary, str) and summary.strip():
                clean = [p.strip() for p in phrases if isinstance(p, str) and p.strip()] if isinstance(
                    phrases, list
                ) else []
                return summary.strip(), clean[:15]
    return content.strip(), []


SYSTEM_PROMPT = (
    "You summarise documents for a personal knowledge base. Reply with JSON only, no prose: "
    '{"summary": "<3-5 sentence summary in the document\'s language>", '
    '"key_phrases": ["<5-8 short key phrases>"]}'
)


class OpenAIChatTransformer:
    """Summary and key phrases from an OpenAI-compatible `POST {base}/chat/completions`."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        timeout: float = 120.0,
        attempts: int = 4,
        backoff: float = 1.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.generator = f"openai-compatible:{model}"
        self._timeout = httpx.Timeout(timeout, connect=5.0)
        self._attempts = attempts
        self._backoff = backoff

    async def _complete(self, messages: list[dict[str, str]]) -> str:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {"model": self.model, "messages": messages, "temperature": 0.2}
        async with httpx.AsyncClient(timeout=self._timeout, headers=headers, trust_env=False) as client:
            try:
                async for attempt in async_retrying(self._backoff, max_wait=20.0, attempts=self._attempts):
                    with attempt:
                        resp = await client.post(f"{self.base_url}/chat/completions", json=body)
                        resp.raise_for_status()
                        data = resp.json()
            except httpx.HTTPError as exc:
                raise TransformError(f"chat completions at {self.base_url} failed: {exc}") from exc
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise TransformError("chat completions returned no message content") from exc
        if not isinstance(content, str) or not content.strip():
            raise TransformError("chat completions returned an empty message")
        return content

    async def transform(self, title: str | None, text: str) -> list[Output]:
        text = text.strip()
        if not text:
            return []
        doc = truncate_text(text)
        user = f"Title: {title}\n\n{doc}" if title else doc
        content = await self._complete(
            [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
        )
        summary, phrases = parse_llm_reply(content)
        outputs = [Output("summary", summary, self.generator)]
        if phrases:
            outputs.append(Output("key_phrases", phrases, self.generator))
        return outputs


def transformer_from(s: Settings, embedder: Embedder) -> Transformer:
    """The chat adapter when LEV_LLM_URL is set, else the local extractive transformer (with `embedder`)."""
    if s.llm_url:
        return OpenAIChatTransformer(s.llm_url, s.llm_api_key, s.llm_model)
    return LocalTransformer(embedder)
