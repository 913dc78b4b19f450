"""Highlights among search results: each matching highlight of the caller becomes a result (its passage as `text`,
its note, `highlight_id`, and its place in the item's text as `location`), scored on the scale of the mode's chunk
results and raised a little (`LIFT`), so a passage the user marked ranks above the same words in the item's body;
then the best `limit` of both."""

from __future__ import annotations

from typing import Any

from lev.store import locations

LIFT = 1.15  # keyword: BM25 times this; semantic: cosine moved this share of the way towards 1; hybrid: the blend


def _span(values: list[float]) -> tuple[float, float]:
    return (min(values), max(values)) if values else (0.0, 0.0)


def _norm(value: float, low: float, high: float) -> float:
    return 1.0 if high <= low else min(1.0, max(0.0, (value - low) / (high - low)))


def scored(rows: list[dict[str, Any]], results: list[dict[str, Any]], mode: str, limit: int,
           semantic_weight: float) -> list[tuple[float, dict[str, Any]]]:
    """(score, row) for the highlights that count in `mode`: a query word in them (keyword), among the `limit`
    nearest (semantic), either (hybrid)."""
    near = sorted((r for r in rows if r["cos"] is not None), key=lambda r: -r["cos"])[:limit]
    near_ids = {r["id"] for r in near}
    out: list[tuple[float, dict[str, Any]]] = []
    if mode == "keyword":
        return [(float(r["bm25"]) * LIFT, r) for r in rows if (r["bm25"] or 0) > 0]
    if mode == "semantic":
        return [((1 + min(1.0, r["cos"] + (1 - r["cos"]) * (LIFT - 1))) / 2, r) for r in near]
    cands = [r for r in rows if (r["bm25"] or 0) > 0 or r["id"] in near_ids]
    cmin, cmax = _span([float(x["similarity"]) for x in results if x.get("similarity") is not None]
                       + [float(r["cos"]) for r in cands if r["cos"] is not None])
    bmin, bmax = _span([float(x.get("keyword_rank") or 0) for x in results] + [float(r["bm25"] or 0) for r in cands])
    for r in cands:
        blend = semantic_weight * _norm(float(r["cos"] or cmin), cmin, cmax) + (1 - semantic_weight) * (
            0.0 if not r["bm25"] else _norm(float(r["bm25"]), bmin, bmax))
        out.append((min(1.0, (0.05 + 0.95 * blend) * LIFT), r))
    return out


def as_result(score: float, r: dict[str, Any], mode: str, outline: locations.Outline) -> dict[str, Any]:
    """A highlight as a search result: the fields of a chunk's result (its location the passage's own: characters,
    pages, heading, from its text's `outline`; the seconds of the chunk it starts in), plus `highlight_id` and
    `note`."""
    where = locations.location((r["char_start"], r["char_end"]), outline)
    return {
        "chunk_id": str(r["chunk_id"]), "item_id": str(r["item_id"]), "title": r["title"], "url": r["url"],
        "text": r["text"], "score": score,
        "similarity": None if mode == "keyword" or r["cos"] is None else float(r["cos"]),
        "keyword_rank": None if mode == "semantic" or not r["bm25"] else float(r["bm25"]),
        "highlight_id": str(r["id"]), "note": r["note"], "kind": r["kind"], "saved_at": r["created_at"].isoformat(),
        "stored_media": bool(r["stored_media"]), "start_sec": r["start_sec"], "end_sec": r["end_sec"],
        "location": {"char_start": where.char_start, "char_end": where.char_end, "page": where.page,
                     "page_end": where.page_end, "heading": where.heading, "slide": where.slide, "sheet": where.sheet,
                     "row_start": where.row_start, "row_end": where.row_end},
    }


def merge(results: list[dict[str, Any]], rows: list[dict[str, Any]], mode: str, limit: int,
          semantic_weight: float) -> list[dict[str, Any]]:
    """The best `limit` of the chunk results and the matching highlights, best first (a highlight before a chunk
    of equal score)."""
    outlines: dict[Any, locations.Outline] = {}  # read once per content, however many of its highlights match
    marked = []
    for s, r in scored(rows, results, mode, limit, semantic_weight):
        if r["chunk_id"] is not None:
            if r["content_id"] not in outlines:
                outlines[r["content_id"]] = locations.Outline.from_json(r["outline"])
            marked.append((s, 0, as_result(s, r, mode, outlines[r["content_id"]])))
    both = marked + [(float(x["score"]), 1, x) for x in results]
    both.sort(key=lambda t: (-t[0], t[1]))
    return [x for _, _, x in both[:limit]]
