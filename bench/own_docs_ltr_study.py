"""A learned ranker for own documents, round two (issues 23 and 24; not a test).

The first round (docs/benchmarks.md, "Tried and not kept (2026-12-07)") had
23 own-document sets, 771 questions, and its pooled leave-one-set-out gain
was not above zero. The gate now holds more sets; this asks again with the
same trainer as the law ranker (services/cli/ltr_training.py: LightGBM
LambdaMART, fixed hyperparameters) and the same features
(services/reranker/ltr.py).

Two steps. ``dump`` runs as a pytest module, so that it gets the quality
gate's in-process mesh (embedded PostgreSQL and Neo4j, e5onnx):

    OWN_LTR_DIR=bench/results/own_ltr PYTHONPATH=.:gen/python python -m pytest \\
        bench/own_docs_ltr_study.py -q -s -p tests.fixtures.pg -p tests.fixtures.neo4j -p tests.fixtures.mesh

It ingests each set of tests/quality/data into its own collection, searches
each question (top_k 30, defaults) and writes the candidate lists with every
channel's score and rank to <OWN_LTR_DIR>/<set>.jsonl.gz. A candidate is
relevant when it holds a gold passage given as text (``graphmesh eval``'s
``passage_matches``), so ranks count chunks, as the own-documents gate does.
Then

    PYTHONPATH=.:gen/python python bench/own_docs_ltr_study.py study [--dir DIR]

prints R@1 / R@10 / MRR@10 of the LTR order beside today's fused order,
each set ranked by a model trained on the other sets only (a user's
collection is never in the training data), per set and pooled, with paired
bootstrap intervals.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO / "tests" / "quality" / "data"
DUMP_DIR = Path(os.environ.get("OWN_LTR_DIR", REPO / "bench" / "results" / "own_ltr"))
TOP_K = 30


def own_sets() -> dict[str, Path]:
    """Set name -> its questions file: every own-documents set of the gate."""
    sets = {p.name: p / "queries.jsonl" for p in sorted(DATA.iterdir())
            if p.is_dir() and (p / "queries.jsonl").is_file()}
    sets["docs"] = DATA / "queries-docs-dev.jsonl"
    return sets


def labelled(record: dict, passages: list[str]) -> dict:
    """A dumped question made ready for the trainer: each candidate keyed by
    its chunk id (ranks count chunks), gold = the chunks holding a passage."""
    from services.cli.evaluate import passage_matches

    gold = [c["id"] for c in record["candidates"] if any(passage_matches(p, c["text"]) for p in passages)]
    return {**record, "gold": gold, "candidates": [{**c, "document_id": c["id"]} for c in record["candidates"]]}


def load(directory: Path) -> dict[str, list[dict]]:
    """Set name -> its labelled questions, from ``directory``'s dumps."""
    dumps = {}
    for path in sorted(directory.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            dumps[path.name.removesuffix(".jsonl.gz")] = [json.loads(line) for line in f if line.strip()]
    return dumps


async def _dump(mesh) -> None:
    import grpc

    from bench.ltr_study import candidate_record
    from bench.parent_context_study import OPTIONS, PATIENT, gateway, ingest
    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from services.cli.evaluate import gold_passages, load_dataset

    DUMP_DIR.mkdir(parents=True, exist_ok=True)
    async with gateway(mesh) as address:
        for name, questions in own_sets().items():
            collection = "ltr_" + name.replace("-", "_")
            await ingest(address, collection, DATA / "docs" if name == "docs" else questions.parent)
            rows = load_dataset(questions)
            out = []
            async with grpc.aio.insecure_channel(address, options=OPTIONS) as ch:
                stub = gateway_pb2_grpc.GatewayServiceStub(ch)
                for row in rows:
                    reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=TOP_K,
                                                                        collections=[collection]), timeout=PATIENT)
                    record = {"id": str(row["id"]), "query": row["query"], "keywords": list(reply.query_info.keywords),
                              "candidates": [candidate_record(c, r) for r, c in enumerate(reply.results, start=1)]}
                    out.append(labelled(record, gold_passages(row)))
            with gzip.open(DUMP_DIR / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
                f.writelines(json.dumps(q, ensure_ascii=False) + "\n" for q in out)
            first = sum(1 for q in out if q["candidates"] and q["candidates"][0]["id"] in q["gold"])
            print(f"{name}: {len(out)} questions, gold first {first}", flush=True)


try:
    import pytest

    @pytest.mark.asyncio(loop_scope="session")
    async def test_dump(mesh):
        await _dump(mesh)
except ImportError:  # the study step needs no pytest
    pass


def leave_one_set_out(dumps: dict[str, list[dict]], channels: tuple[str, ...]) -> dict:
    """Each set ranked by a model trained on the other sets only; the table
    of LTR against today's order (``compare_table``), per set and pooled."""
    from services.cli.ltr_training import compare_table, first_gold, ltr_order, question_key, train
    from services.reranker.ltr import FeatureSpec

    spec = FeatureSpec(channels)
    questions = [{**q, "set": name} for name, qs in dumps.items() for q in qs]
    baseline = {question_key(q): first_gold(q) for q in questions}
    loso: dict[str, int | None] = {}
    for name in dumps:
        booster = train([q for q in questions if q["set"] != name], spec=spec)
        loso.update({question_key(q): first_gold(q, ltr_order(booster, q, spec)) for q in questions if q["set"] == name})
    return compare_table(baseline, loso, list(dumps))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["study"])
    parser.add_argument("--dir", type=Path, default=DUMP_DIR)
    parser.add_argument("--channels", default="", help="channels with their own features (comma-separated; "
                        "default: the law ranker's, services/reranker/ltr.py DEFAULT_CHANNELS)")
    args = parser.parse_args(argv)
    from services.cli.ltr_training import print_table
    from services.reranker.ltr import DEFAULT_CHANNELS

    dumps = load(args.dir)
    channels = tuple(c for c in args.channels.split(",") if c) or DEFAULT_CHANNELS
    table = leave_one_set_out(dumps, channels)
    print(f"{sum(map(len, dumps.values()))} questions in {len(dumps)} sets; channels {', '.join(channels)}")
    print_table("leave one set out (each set ranked by a model trained on the others)", table)
    (args.dir / "study.json").write_text(json.dumps({"channels": channels, "leave_one_set_out": table},
                                                    ensure_ascii=False, indent=1), "utf-8")


if __name__ == "__main__":
    main()
