"""`python -m bench.run PART`: run one benchmark part (quality, latency, ingest, load, busy, hostile, cluster,
automation, light, sharing, answers, highlights, unfair, filtered, deliveries, folders, documents, tagged, cost,
smoke) or `all`.

Each part module has `main() -> str` returning a markdown section; it is saved in bench/results/PART.md
and bench/RESULTS.md is rebuilt from every saved section under a header naming machine, date and commit, then
bench/TUNING.md and any hand-kept section saved in bench/results/ under another name (a trial's record).
"""

from __future__ import annotations

import importlib
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from bench.common import commit, machine

HERE = Path(__file__).resolve().parent
PARTS = ("quality", "latency", "ingest", "load", "busy", "hostile", "cluster", "automation", "light", "sharing",
         "answers", "highlights", "unfair", "filtered", "deliveries", "folders", "documents", "tagged", "cost")


def write_results() -> Path:
    sections = []
    for part in PARTS:
        f = HERE / "results" / f"{part}.md"
        if f.exists():
            sections.append(f.read_text().strip())
    tuning = HERE / "TUNING.md"  # the hand-kept profiling record, after the generated sections
    if tuning.exists():
        sections.append(tuning.read_text().strip())
    for f in sorted((HERE / "results").glob("*.md")):  # hand-kept sections (trials), kept when a part is rerun
        if f.stem not in PARTS:
            sections.append(f.read_text().strip())
    out = HERE / "RESULTS.md"
    out.write_text("# Lev benchmark results\n\n"
                   "Written by `make bench` (each part by `make bench-PART`); every figure beside its baseline,\n"
                   "measured in the same run. Each section names its own machine, date and commit.\n\n"
                   + "\n\n".join(sections) + "\n")
    return out


def run_part(part: str) -> str:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    module = importlib.import_module(f"bench.{part}")
    started, measured = datetime.now(UTC), commit()  # the commit measured, not the one checked out at the end
    body = module.main()
    header = (f"## {part}\n\nMachine: {machine()}. Date: {started:%Y-%m-%d %H:%M} UTC. "
              f"Commit: {measured}.\n\n")
    section = header + body.strip() + "\n"
    if part != "smoke":
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / f"{part}.md").write_text(section)
        write_results()
    return section


def main(argv: list[str]) -> None:
    parts = PARTS if argv[:1] == ["all"] else tuple(argv) or PARTS
    for part in parts:
        print(run_part(part), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
