"""lev.ingest.chunking: token budgets with the real MiniLM tokenizer, overlap, and long text (its speed is measured
by `make bench-ingest`, not asserted here: a busy machine would fail a wall-clock budget)."""

from __future__ import annotations

import random

import pytest

from lev.embedding.minilm import LOCAL_MAX_SEQ_LENGTH, tokenizer
from lev.ingest.chunking import (
    MAX_CHUNK_CHARS,
    capacity_for,
    chunk_text,
    embed_input,
    normalize_whitespace,
)

WORDS = (
    "the lighthouse keeper climbed spiral stairs before dawn to trim the wick and polish the great "
    "Fresnel lens whose prisms bent scattered light into one beam visible twenty nautical miles away "
    "internationalization pneumonoultramicroscopic 1823 Zürich naïve café"
).split()


def prose(n_chars: int, seed: int = 7) -> str:
    rnd = random.Random(seed)
    paras: list[str] = []
    total = 0
    while total < n_chars:
        sentences = [
            " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 30))).capitalize() + rnd.choice(".!?")
            for _ in range(rnd.randint(1, 9))
        ]
        para = " ".join(sentences)
        paras.append(para)
        total += len(para) + 2
    return "\n\n".join(paras)


def model_tokens(text: str) -> int:
    return len(tokenizer().encode(text).ids)  # with [CLS]/[SEP]


@pytest.mark.parametrize(
    "title",
    [None, "", "Lighthouses", "A considerably longer title about lighthouses, lenses and the sea " * 3,
     "T" * 2000 + " " + "very long title " * 200],
)
def test_every_embedded_string_fits_the_model_window(title: str | None) -> None:
    text = prose(60_000)
    chunks = chunk_text(text, title)
    assert len(chunks) > 10
    for c in chunks:
        assert c == c.strip() and c
        assert model_tokens(embed_input(title, c)) <= LOCAL_MAX_SEQ_LENGTH
    # capacity is used: the median chunk is well past half the budget
    sizes = sorted(model_tokens(c) for c in chunks)
    assert sizes[len(sizes) // 2] > capacity_for(title) // 2


def test_capacity_shrinks_with_title_and_has_a_floor() -> None:
    assert capacity_for(None) == 200
    short = capacity_for("Lighthouses")
    assert 190 <= short < 200
    assert 64 <= capacity_for("word " * 500) < short


def test_embed_input_layout() -> None:
    assert embed_input("Title", "body") == "Title\n\nbody"
    assert embed_input(None, "body") == "body"
    assert embed_input("  Spaced   title ", "body") == "Spaced title\n\nbody"


def test_chunks_overlap_and_cover_the_text() -> None:
    text = prose(20_000, seed=3)
    chunks = chunk_text(text, "Title")
    assert len(chunks) >= 5
    norm = normalize_whitespace(text)
    overlaps = 0
    for a, b in zip(chunks, chunks[1:], strict=False):
        head = " ".join(b.split()[:5])
        if head in a:
            overlaps += 1
    assert overlaps >= len(chunks) // 2
    # every chunk is a verbatim slice of the normalised text, and together they reach its end
    for c in chunks:
        assert c in norm
    assert norm.endswith(chunks[-1])
    assert norm.startswith(chunks[0])


def test_short_blank_and_whitespace() -> None:
    assert chunk_text("", "t") == []
    assert chunk_text("  \n\t \n ", None) == []
    messy = "Hello   world.\n\n\n\nSecond\tparagraph.  "
    assert chunk_text(messy, None) == ["Hello world.\n\nSecond paragraph."]


def test_prefers_paragraph_and_sentence_boundaries() -> None:
    text = prose(30_000, seed=11)
    chunks = chunk_text(text, None)
    ends_clean = sum(c[-1] in ".!?" for c in chunks[:-1])
    assert ends_clean >= 0.9 * (len(chunks) - 1)


def test_pathological_inputs_stay_bounded() -> None:
    rnd = random.Random(2)
    blob = "".join(rnd.choice("abcdefgh") for _ in range(50_000))  # one giant "word" (a single [UNK] wordpiece)
    chunks = chunk_text(blob, None)
    assert "".join(chunks) == blob
    assert all(len(c) <= MAX_CHUNK_CHARS for c in chunks)
    nopunct = " ".join(random.Random(1).choice(WORDS) for _ in range(20_000))
    for c in chunk_text(nopunct, "t"):
        assert model_tokens(embed_input("t", c)) <= LOCAL_MAX_SEQ_LENGTH
    cjk = "灯塔守护者在黎明前爬上螺旋楼梯。" * 500
    for c in chunk_text(cjk, None):
        assert model_tokens(c) <= LOCAL_MAX_SEQ_LENGTH


def test_one_megabyte_is_chunked_whole() -> None:
    text = prose(1_000_000, seed=5)
    chunks = chunk_text(text, "A title")
    assert len(chunks) > 1000
    assert all(len(c) <= MAX_CHUNK_CHARS for c in chunks)


def test_runs_of_one_character_are_cut_before_chunking() -> None:
    """Issue 38 item 3: 5 MiB of quotes was 27,888 chunks (one word piece a character)."""
    from lev.ingest.chunking import MAX_RUN, chunk_text_capped, normalize_text

    assert normalize_text('a "' + '"' * 5_000_000 + ' b') == 'a ' + '"' * MAX_RUN + ' b'
    assert normalize_text("x" * 40 + " ---- " + "=" * 16) == "x" * MAX_RUN + " ---- " + "=" * 16  # short runs stay
    cut = chunk_text_capped('"' * 5 * 1024 * 1024, "Quotes", 2000)
    assert (cut.bodies, cut.indexed_chars) == (['"' * MAX_RUN], None)


def test_a_text_past_the_cap_is_cut_and_says_where() -> None:
    from lev.ingest.chunking import chunk_text_capped, normalize_text

    text = prose(300_000)
    whole = chunk_text(text, "Book")
    cut = chunk_text_capped(text, "Book", 40)
    assert len(whole) > 40 and cut.bodies == whole[:40]  # the slices tokenized match the whole text's chunks
    assert cut.indexed_chars is not None and cut.bodies[-1] in normalize_text(text)[:cut.indexed_chars]
    assert cut.total_chars == len(normalize_text(text))
    under = chunk_text_capped(text, "Book", len(whole))
    assert under.bodies == whole and under.indexed_chars is None


def test_tokenizing_in_slices_keeps_the_chunks_of_the_whole_text() -> None:
    from lev.ingest import chunking

    text = prose(450_000, seed=11)  # more than two slices
    assert chunking.chunk_text_capped(text, "T", 10_000).bodies == chunk_text(text, "T")
