"""Probe (not a test): does the best line's lexical coverage of the question
re-rank GraphMesh's results? Over a running stack, client-side.

For each question: GraphMesh's Search top ``--depth`` (default 20); each
result cut into the pieces the extractive answer quotes (its lines and
sentences, a label line joined to the line it introduces:
``extractive.quotable_pieces``), each piece scored as the extractive answer
scores it (``extractive.sentence_score``: idf-weighted keyword and character
bigram coverage of the question, a number bonus when it asks an amount);
a result's coverage = its best piece's score. New order: fused score
+ w x coverage (min-max over the list) for each
``--weights`` value (what the fuser computes when the coverage comes as
one more weighted channel of weight w), the weight also chosen by 5-fold
cross-validation over
the pooled questions ("fused+cv"); and coverage alone. R@1 / R@10 / MRR@10
against GraphMesh's own order, paired bootstrap 95% intervals.

Sets: ``docs`` (gold as text, over chunks, collection ``--docs-collection``)
and the law dev sets (over documents, the default collection).

    python bench/line_coverage_probe.py [--sets docs,scenario,consult,facts] [--weights 0.25,0.5,1,2]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import first_gold_rank  # noqa: E402
from reorder_probe import each_question, probe_main, report_sets  # noqa: E402
from sentence_maxsim_probe import cross_validate, minmax  # noqa: E402

import numpy as np  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2_grpc  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.gateway.answer import extractive  # noqa: E402


def coverage_scores(question: str, texts: list[str]) -> list[float]:
    """Each text's best quotable piece's score against ``question``."""
    scorer = extractive.PieceScorer(question, [extractive.quotable_pieces(t) for t in texts])
    return [max((scorer.score(p) for p in pieces), default=0.0) for pieces in scorer.pieces]


async def run(args) -> dict:
    use_local_mesh_token()
    addresses = MeshAddresses()
    weights = [float(w) for w in args.weights.split(",")]
    systems = ["graphmesh", "coverage", *(f"fused+{w}" for w in weights)]
    ranks: dict[str, dict[str, dict[str, int | None]]] = {s: {} for s in systems}
    score_ms: list[float] = []
    async with channel(addresses.gateway_addr) as gch:
        gateway = gateway_pb2_grpc.GatewayServiceStub(gch)
        async for name, qid, row, results, keys, gold in each_question(gateway, args, ranks):
            t0 = time.perf_counter()
            cov = minmax(np.array(coverage_scores(row["query"], [r.text for r in results])))
            score_ms.append((time.perf_counter() - t0) * 1000)
            fused = np.array([r.fused_score for r in results], dtype=float)  # as the fuser sums channel terms
            ranks["graphmesh"][name][qid] = first_gold_rank(keys, gold)
            ranks["coverage"][name][qid] = first_gold_rank([keys[i] for i in np.argsort(-cov, kind="stable")], gold)
            for w in weights:
                order = np.argsort(-(fused + w * cov), kind="stable")
                ranks[f"fused+{w}"][name][qid] = first_gold_rank([keys[i] for i in order], gold)
    cross_validate(ranks, weights, args.sets.split(","))
    systems.append("fused+cv")
    report: dict = {"args": vars(args), "coverage_ms_p50": float(np.median(score_ms)),
                    "sets": report_sets(ranks, systems, args.sets.split(","))}
    print(f"coverage scoring p50 {report['coverage_ms_p50']:.1f} ms per question ({args.depth} results)")
    return report


def main() -> None:
    probe_main(__doc__, "line_coverage_probe", run, "0.25,0.5,1,2")


if __name__ == "__main__":
    main()
