"""Channel weights of the generic path, cross-validated over the pooled
own-document sets (issue 24 items 1 and 5, issue 23 item 1's rule; not a
test).

Two steps. ``dump`` is a pytest module run, so it gets the quality gate's
in-process mesh; it ingests the three design documents
(tests/quality/data/docs) and the 60 laws the law dev questions cite as
plain-text files (tests/quality/law_files.py) into collections without a
domain pack, then asks every question of the documents dev set (79) and of
the laws' scenario (224) and consult (142) sets with Search at top_k 100,
and writes each question's candidates with every channel's score and rank
and whether the candidate holds a gold passage
(services.cli.evaluate.passage_matches) to bench/results/generic_fusion/:

    STUDY=dump PYTHONPATH=.:gen/python python -m pytest bench/generic_fusion_study.py -q -s \\
        -p tests.fixtures.pg -p tests.fixtures.neo4j -p tests.fixtures.mesh

``study`` then re-fuses those lists offline with the fuser's own weighted
fusion (services.fuser.core.weighted_scores) for every weight vector of a
grid over the channels present, and reports, against today's weights
(services/gateway/profiles.py DEFAULT_WEIGHTS, fitted on the law dev sets):
the weights chosen by k-fold cross-validation over the pooled questions
(chosen on the other folds, scored on the held-out fold), and
leave-one-set-out (chosen on two sets, scored on the third), each with
paired bootstrap 95% intervals (services/cli/significance.py):

    PYTHONPATH=.:gen/python python bench/generic_fusion_study.py study [--folds 5]

Re-fusing the top 100 of today's order with today's weights must give
today's order back; ``study`` prints how often it does.
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "generic_fusion"
SETS = ("docs", "lf-scenario", "lf-consult")
#: Weights tried per channel (today's defaults, services/gateway/profiles.py DEFAULT_WEIGHTS, are among them).
GRID = (0.0, 0.25, 0.5, 1.0, 2.0)


# ---- dump (a pytest module run) -------------------------------------------------------------

if os.environ.get("STUDY") == "dump":
    import grpc
    import pytest

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from services.cli.evaluate import gold_passages, load_dataset, passage_matches
    from services.gateway.config import GatewaySettings
    from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, patient_gateway
    from tests.quality.law_files import cited_laws, law_files

    pytestmark = [pytest.mark.asyncio(loop_scope="session")]
    DOCS = Path(__file__).resolve().parents[1] / "tests" / "quality" / "data"

    async def _ingest(stub, collection: str, files: dict[str, bytes]) -> None:
        upload = [gateway_pb2.IngestFile(name=f"{collection}/{name}", content=data) for name, data in files.items()]
        reply = await stub.Ingest(gateway_pb2.IngestRequest(files=upload, collection=collection), timeout=1800)
        assert all(f.status == gateway_pb2.FILE_STATUS_STORED for f in reply.files), reply.files

    async def _dump(stub, name: str, collection: str, rows: list[dict]) -> None:
        OUT.mkdir(parents=True, exist_ok=True)
        with gzip.open(OUT / f"{name}.jsonl.gz", "wt", encoding="utf-8") as out:
            for row in rows:
                reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=100, collections=[collection]),
                                          timeout=PATIENT_SECONDS)
                golds = gold_passages(row)
                out.write(json.dumps({"id": str(row["id"]), "set": name, "candidates": [
                    {"gold": any(passage_matches(g, c.text) for g in golds),
                     "channels": {s.channel: [s.score, s.rank] for s in c.channel_scores}}
                    for c in reply.results]}, ensure_ascii=False) + "\n")
        print(f"{name}: {len(rows)} questions -> {OUT / (name + '.jsonl.gz')}", flush=True)

    async def test_dump(mesh):
        files, questions = law_files(cited_laws())
        limit = GatewaySettings().max_query_chars
        async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
            async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
                stub = gateway_pb2_grpc.GatewayServiceStub(ch)
                await _ingest(stub, "studydocs", {p.name: p.read_bytes() for p in sorted((DOCS / "docs").glob("*.txt"))})
                await _dump(stub, "docs", "studydocs", load_dataset(DOCS / "queries-docs-dev.jsonl"))
                started = time.perf_counter()
                await _ingest(stub, "studylaws", {n: t.encode() for n, t in files.items()})
                print(f"{len(files)} law files ingested in {time.perf_counter() - started:.0f} s", flush=True)
                for name in ("scenario", "consult"):
                    await _dump(stub, f"lf-{name}", "studylaws", [q for q in questions[name] if len(q["query"]) <= limit])


# ---- study (offline) ------------------------------------------------------------------------

def load(sets: tuple[str, ...] = SETS) -> list[dict]:
    """The dumped questions of ``sets``, in file order."""
    rows = []
    for name in sets:
        with gzip.open(OUT / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            rows.extend(json.loads(line) for line in f)
    return rows


def first_gold(row: dict, weights: dict[str, float] | None) -> int | None:
    """1-based rank (top 10) of the first gold candidate once ``row``'s
    candidates are re-fused with ``weights`` (None: today's order as dumped)."""
    from services.fuser import core

    candidates = row["candidates"]
    if weights is None:
        order = list(range(len(candidates)))
    else:
        items = [core.Item(str(i), str(i), "", [], "", 0, scores=[core.Scored(ch, s, r) for ch, (s, r) in c["channels"].items()])
                 for i, c in enumerate(candidates)]
        fused = core.weighted_scores(items, weights)
        order = [int(it.id) for it in core.rank(items, fused, 10)]
    return next((n for n, i in enumerate(order[:10], 1) if candidates[i]["gold"]), None)


def rank_matrix(rows: list[dict], channels: list[str], grid: np.ndarray) -> np.ndarray:
    """[question, grid point] -> 1-based rank of the first gold candidate
    (0 when none is in the top 10) once re-fused with that weight vector:
    services.fuser.core.weighted_scores (each channel's scores min-max
    normalised over the candidates holding it, 1.0 each when all equal;
    absent = 0) for every grid point at once; ties go to today's order."""
    out = np.zeros((len(rows), len(grid)), dtype=np.int32)
    for q, row in enumerate(rows):
        candidates = row["candidates"]
        gold = np.array([c["gold"] for c in candidates], dtype=bool)
        if not gold.any():
            continue
        norm = np.zeros((len(candidates), len(channels)))
        for j, ch in enumerate(channels):
            held = [i for i, c in enumerate(candidates) if ch in c["channels"]]
            if not held:
                continue
            values = np.array([candidates[i]["channels"][ch][0] for i in held])
            low, high = values.min(), values.max()
            norm[held, j] = 1.0 if np.isclose(high, low) else (values - low) / (high - low)
        fused = norm @ grid.T - 1e-9 * np.arange(len(candidates))[:, None]  # ties: today's order
        first = fused[gold].max(axis=0)
        ranks = 1 + (fused[~gold] > first).sum(axis=0)
        out[q] = np.where(ranks <= 10, ranks, 0)
    return out


def _ranks(column: np.ndarray, ids: list[str]) -> dict[str, int | None]:
    return {i: (int(r) or None) for i, r in zip(ids, column)}


def _mrr(matrix: np.ndarray) -> np.ndarray:
    """MRR@10 per grid point over the rows of ``matrix``."""
    return np.where(matrix > 0, 1.0 / np.maximum(matrix, 1), 0.0).mean(axis=0)


def study(folds: int, seed: int) -> None:
    from services.cli.significance import compare_ranks

    rows = load()
    channels = sorted({ch for r in rows for c in r["candidates"] for ch in c["channels"]})
    from services.gateway.profiles import DEFAULT_WEIGHTS

    today = [DEFAULT_WEIGHTS.get(ch, 1.0) for ch in channels]
    points = [today] + [list(ws) for ws in itertools.product(GRID, repeat=len(channels)) if any(ws) and list(ws) != today]
    grid = np.array(points)
    ids = [f"{r['set']}#{r['id']}" for r in rows]
    started = time.perf_counter()
    matrix = rank_matrix(rows, channels, grid)
    same = sum(first_gold(r, dict(zip(channels, today))) == first_gold(r, None) for r in rows)
    exact = sum((matrix[q, 0] or None) == first_gold(r, dict(zip(channels, today))) for q, r in enumerate(rows))
    print(f"{len(rows)} questions, channels {channels}, {len(grid)} weight vectors ({time.perf_counter() - started:.0f} s); "
          f"today's weights re-fused give today's first gold rank for {same} of {len(rows)}, and the matrix agrees "
          f"with services.fuser.core for {exact}", flush=True)

    def named(point: np.ndarray) -> dict[str, float]:
        return {ch: float(w) for ch, w in zip(channels, point)}

    def report(label: str, chosen: dict[str, int | None]) -> None:
        base = _ranks(matrix[:, 0], ids)
        present = {i.split("#", 1)[0] for i in chosen}
        for name in (*SETS, "pooled"):
            keys = [i for i in chosen if name == "pooled" or i.split("#", 1)[0] == name]
            if not keys or (name == "pooled" and len(present) == 1):
                continue
            deltas = compare_ranks({i: base[i] for i in keys}, {i: chosen[i] for i in keys})
            print(f"  {label:22s} {name:11s} n={len(keys):3d} " + "  ".join(
                f"{m} {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}]" for m, d in deltas.items()), flush=True)

    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    out_of_fold: dict[str, int | None] = {}
    for k in range(folds):
        held = sorted(order[i] for i in range(k, len(order), folds))
        fitting = sorted(set(range(len(rows))) - set(held))
        best = int(np.argmax(_mrr(matrix[fitting])))  # ties: the first, today's weights come first
        print(f"fold {k + 1}: {named(grid[best])}", flush=True)
        out_of_fold.update(_ranks(matrix[held, best], [ids[i] for i in held]))
    report(f"{folds}-fold CV", out_of_fold)
    for left_out in SETS:
        fitting = [q for q, r in enumerate(rows) if r["set"] != left_out]
        held = [q for q, r in enumerate(rows) if r["set"] == left_out]
        best = int(np.argmax(_mrr(matrix[fitting])))
        print(f"chosen without {left_out}: {named(grid[best])}", flush=True)
        report(f"without {left_out}", _ranks(matrix[held, best], [ids[i] for i in held]))
    best = int(np.argmax(_mrr(matrix)))
    print(f"chosen on all {len(rows)}: {named(grid[best])}, MRR@10 {_mrr(matrix)[best]:.4f} against {_mrr(matrix)[0]:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["study"])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    study(args.folds, args.seed)


if __name__ == "__main__":
    main()
