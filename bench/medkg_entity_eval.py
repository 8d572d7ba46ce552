"""Entity retrieval quality on the medkg-zh dev sets (benchmark, not a test):
runs both labelled sets through the gateway's SearchEntities (as
`graphmesh eval --entities`), prints top-1 (= recall@1), recall@10, MRR@10
and latency, and saves them as JSON.

Needs a running stack with medkg-zh ingested:

    graphmesh up --detach
    graphmesh ingest entities ../shared/data/medkg-zh/entities.jsonl.gz
    graphmesh ingest triples ../shared/data/medkg-zh/triples.jsonl.gz
    python bench/medkg_entity_eval.py [--limit N]

Targets (issue 4): symptom top-1 >= 0.95 and recall@10 >= 0.99; alias
top-1 >= 0.40 and recall@10 >= 0.60.
"""
from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from services.cli.evaluate import load_dataset, run_queries, summarise
from services.common.settings import MeshAddresses

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "medkg-zh"
SETS = {"symptom": "queries-symptom-dev.jsonl", "alias": "queries-alias-dev.jsonl"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("bench/results/medkg_entity_eval.json"))
    args = ap.parse_args()
    address = MeshAddresses().gateway_addr
    results = {}
    for name, file in SETS.items():
        rows = asyncio.run(run_queries(address, load_dataset(DATA / file, args.limit), 10, args.concurrency, 60.0, entities=True))
        results[name] = summarise(rows)
        print(name, json.dumps(results[name]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
