"""Shared parts of the probes that re-order GraphMesh's own top results by a
new per-result score (bench/sentence_maxsim_probe.py, bench/line_coverage_probe.py,
bench/sentence_hybrid_probe.py): one question's results with the keys gold is
counted on, the report of R@1 / R@10 / MRR@10 per set and pooled against
GraphMesh's own order, and the command line they share."""
from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

from _common import SHARED_DATA, save
from graphmesh.gateway.v1 import gateway_pb2
from services.cli.evaluate import gold_passages, load_dataset, passage_matches
from services.cli.significance import RANK_METRICS, compare_ranks, pooled, rank_metric

DOCS = Path(__file__).resolve().parents[1] / "tests" / "quality" / "data" / "queries-docs-dev.jsonl"


def dataset_path(name: str) -> Path:
    """The documents dev set for "docs", else the law dev set ``name``."""
    return DOCS if name == "docs" else SHARED_DATA / "law-zh" / f"queries-{name}-dev.jsonl"


async def top_results(gateway, name: str, row: dict, depth: int, docs_collection: str):
    """GraphMesh's Search top ``depth`` for ``row`` and the keys gold is
    counted on: (results, keys, gold) with chunk ids and the chunks holding
    a gold passage for the documents set, document ids and the gold ids for
    the law sets; ([], [], set()) when nothing is found."""
    reply = await gateway.Search(gateway_pb2.SearchRequest(
        query=row["query"], top_k=depth, collections=[docs_collection] if name == "docs" else []), timeout=120)
    results = list(reply.results)
    if not results:
        return [], [], set()
    passages = gold_passages(row)
    if passages:
        return results, [r.id for r in results], {r.id for r in results if any(passage_matches(p, r.text) for p in passages)}
    return results, [r.document_id for r in results], set(map(str, row["gold"]))


async def each_question(gateway, args, ranks: dict):
    """Yields (set, question id, row, results, keys, gold) for every question
    of ``args.sets`` that found something; a question that found nothing is
    ranked None for every system of ``ranks`` (system -> set -> id -> rank)."""
    for name in args.sets.split(","):
        for per_system in ranks.values():
            per_system[name] = {}
        for row in load_dataset(dataset_path(name), args.limit or None):
            qid = str(row["id"])
            results, keys, gold = await top_results(gateway, name, row, args.depth, args.docs_collection)
            if not results:
                for per_system in ranks.values():
                    per_system[name][qid] = None
                continue
            yield name, qid, row, results, keys, gold
        print(f"{name}: {len(ranks['graphmesh'][name])} questions", flush=True)


def report_sets(ranks: dict, systems: list[str], sets: list[str]) -> dict:
    """Per set and pooled: each system's R@1 / R@10 / MRR@10 and its paired
    delta against "graphmesh" (printed as a table and returned)."""
    out = {}
    for name in [*sets, "pooled"]:
        per = {s: (pooled(ranks[s]) if name == "pooled" else ranks[s][name]) for s in systems}
        entry = {s: {m: round(float(np.mean([rank_metric(m, r) for r in per[s].values()])), 4) for m in RANK_METRICS}
                 for s in systems}
        entry["minus_graphmesh"] = {s: {m: d.as_dict() for m, d in compare_ranks(per["graphmesh"], per[s]).items()}
                                    for s in systems[1:]}
        lines = [f"== {name} (n={len(per['graphmesh'])}): R@1 / R@10 / MRR@10"]
        for s in systems:
            line = f"  {s:12s} " + " / ".join(f"{entry[s][m]:.3f}" for m in RANK_METRICS)
            if s != "graphmesh":
                for m in ("recall@1", "mrr@10"):
                    d = entry["minus_graphmesh"][s][m]
                    line += f"   {m} {d['delta']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
            lines.append(line)
        entry["table"] = lines
        out[name] = entry
        print("\n".join(lines), flush=True)
    return out


def probe_main(doc: str, name: str, run: Callable[[argparse.Namespace], Awaitable[dict]], weights: str,
               extra: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    """The probes' command line: ``--sets``, ``--docs-collection``,
    ``--depth``, ``--weights`` (default ``weights``), ``--limit`` and the
    probe's own options (``extra``); runs ``run`` and saves its report as
    bench/results/<name>-<time>.json."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="docs,scenario,consult,facts")
    parser.add_argument("--docs-collection", default="designdocs")
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--weights", default=weights)
    parser.add_argument("--limit", type=int, default=0)
    if extra:
        extra(parser)
    save(name, asyncio.run(run(parser.parse_args())))
