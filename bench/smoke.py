"""`python -m bench.run smoke`: a small end-to-end check of the benchmark harness (run by `make test`).

Starts a fresh Lev, ingests 20 synthetic documents through the REST API with the quality part's ingest code,
searches a tiny judged query set in all three modes through REST, and scores it with the quality part's
metric code (pytrec_eval). Needs no SciFact data; takes well under a minute.
"""

from __future__ import annotations

import time

from bench.common import cleanup, start_lev
from bench.quality import metrics, rest_run
from bench.scifact import ingest_docs

DOCS: dict[str, tuple[str, str]] = {
    "volcano": ("Volcanoes", "A volcano erupts when magma rises through the crust; lava flows and ash clouds follow."),
    "glacier": ("Glaciers", "Glaciers are slow rivers of ice that carve valleys and leave moraines as they retreat."),
    "coral": ("Coral reefs", "Coral reefs are built by polyps; warm water bleaching kills the symbiotic algae."),
    "bees": ("Honey bees", "Honey bees pollinate flowering crops and store nectar as honey inside wax combs."),
    "tides": ("Ocean tides", "Tides rise and fall twice a day, pulled by the gravity of the moon and the sun."),
    "compiler": ("Compilers", "A compiler parses source code into a syntax tree and emits optimised machine code."),
    "bread": ("Sourdough bread", "Sourdough is leavened by a starter of wild yeast and lactobacilli."),
    "chess": ("Chess openings", "The Sicilian Defence answers the king's pawn opening with the c-pawn for black."),
    "vaccine": ("Vaccines", "Vaccines train the immune system to make antibodies against a weakened pathogen."),
    "bridge": ("Suspension bridges", "Suspension bridges hang the deck from steel cables slung between tall towers."),
    "piano": ("Pianos", "A piano's hammers strike tuned steel strings when the keys are pressed."),
    "desert": ("Deserts", "Deserts receive very little rain; cacti store water in thick fleshy stems."),
    "satellite": ("Satellites", "Satellites orbit the earth; geostationary ones match the planet's rotation."),
    "cheese": ("Cheese making", "Cheese is made by curdling milk with rennet, then pressing and ageing the curds."),
    "photosynthesis": ("Photosynthesis", "Plants turn sunlight, water and carbon dioxide into glucose and oxygen."),
    "earthquake": ("Earthquakes", "Earthquakes happen when tectonic plates slip along a fault, sending seismic waves."),
    "bicycle": ("Bicycles", "A bicycle's chain drives the rear wheel; gears change the pedalling cadence."),
    "owl": ("Owls", "Owls hunt at night, finding mice by sound with their asymmetric ears."),
    "tea": ("Green tea", "Green tea leaves are steamed or pan-fired soon after picking to stop oxidation."),
    "lighthouse": ("Lighthouses", "A lighthouse warns ships off rocks with a rotating lamp and a Fresnel lens."),
}
QUERIES: dict[str, str] = {
    "q1": "magma lava eruption",
    "q2": "how do ice sheets shape valleys",
    "q3": "why do reefs bleach in warm seas",
    "q4": "insects that make honey and pollinate crops",
    "q5": "effect of the moon on sea level",
    "q6": "turning source code into machine instructions",
    "q7": "wild yeast starter for baking",
    "q8": "defence against e4 with the c pawn",
    "q9": "immune response and antibodies",
    "q10": "nocturnal birds hunting mice",
}
QRELS: dict[str, dict[str, int]] = {
    "q1": {"volcano": 1}, "q2": {"glacier": 1}, "q3": {"coral": 1}, "q4": {"bees": 1}, "q5": {"tides": 1},
    "q6": {"compiler": 1}, "q7": {"bread": 1}, "q8": {"chess": 1}, "q9": {"vaccine": 1}, "q10": {"owl": 1},
}
MODES = ("hybrid", "semantic", "keyword")


class Report(str):
    """The markdown section, with the numbers behind it as `.metrics` ({mode: {measure: value}})."""

    metrics: dict[str, dict[str, float]]


def main() -> Report:
    t0 = time.perf_counter()
    lev = start_lev()
    try:
        item_to_doc, ingest_s = ingest_docs(lev, DOCS, clients=2)
        scores = {}
        for mode in MODES:
            run, _ = rest_run(lev, QUERIES, list(QUERIES), mode, item_to_doc, limit=10)
            scores[mode] = metrics(run, QRELS)
    finally:
        cleanup(lev)
    lines = ["### Harness smoke (synthetic, 20 docs, 10 judged queries)", "",
             f"Ingested {len(item_to_doc)} docs through the REST API in {ingest_s:.1f} s; total "
             f"{time.perf_counter() - t0:.0f} s.", "",
             "| mode | nDCG@10 | Recall@50 |", "| --- | --- | --- |"]
    lines += [f"| {m} | {s['ndcg_cut.10']:.3f} | {s['recall.50']:.3f} |" for m, s in scores.items()]
    report = Report("\n".join(lines))
    report.metrics = scores
    return report


if __name__ == "__main__":
    print(main())
