"""Probe (not a test): does a sentence-level hybrid re-rank GraphMesh's
results, where the same piece of a chunk must match the question both ways?
Over a running stack, client-side.

The sentence MaxSim channel scores a chunk by its best sentence's e5 cosine,
and bench/line_coverage_probe.py by its best piece's lexical coverage; each
alone is a separate channel summed by the fuser, so a chunk can win on one
sentence that is similar and another that shares the question's words. Here
each quotable piece (``extractive.quotable_pieces``: lines, sentences, a
label joined to its line) gets h = z(cosine) + a x z(coverage), both
min-max normalised over all pieces of the question's top ``--depth``
results; a chunk's score is its best piece's h. New order: fused score + w
x min-max(chunk score), for each a in ``--mix`` and w in ``--weights``;
(a, w) also chosen by 5-fold cross-validation over the pooled questions
("fused+cv"). R@1 / R@10 / MRR@10 against GraphMesh's own order, paired
bootstrap 95% intervals.

    python bench/sentence_hybrid_probe.py [--sets docs,scenario,consult,facts] [--mix 0.5,1,2] [--weights 0.5,1,2]
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

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc  # noqa: E402
from graphmesh.gateway.v1 import gateway_pb2_grpc  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.gateway.answer import extractive  # noqa: E402


def chunk_scores(cosines: list[np.ndarray], coverages: list[np.ndarray], mix: float) -> np.ndarray:
    """Each chunk's best piece under h = z(cosine) + mix x z(coverage), the
    z's min-max over every piece of the question's chunks."""
    cos_all, cov_all = np.concatenate(cosines), np.concatenate(coverages)
    lo_c, span_c = cos_all.min(), np.ptp(cos_all) or 1.0
    lo_v, span_v = cov_all.min(), np.ptp(cov_all) or 1.0
    return np.array([float(((c - lo_c) / span_c + mix * (v - lo_v) / span_v).max())
                     for c, v in zip(cosines, coverages)])


async def run(args) -> dict:
    use_local_mesh_token()
    addresses = MeshAddresses()
    mixes = [float(m) for m in args.mix.split(",")]
    weights = [float(w) for w in args.weights.split(",")]
    grid = [f"a{m}w{w}" for m in mixes for w in weights]
    systems = ["graphmesh", *(f"fused+{g}" for g in grid)]
    ranks: dict[str, dict[str, dict[str, int | None]]] = {s: {} for s in systems}
    embed_ms: list[float] = []
    sets = args.sets.split(",")
    async with channel(addresses.gateway_addr) as gch, channel(addresses.expander_addr) as ech:
        gateway = gateway_pb2_grpc.GatewayServiceStub(gch)
        expander = expander_pb2_grpc.ExpanderServiceStub(ech)
        async for name, qid, row, results, keys, gold in each_question(gateway, args, ranks):
            pieces = [extractive.quotable_pieces(r.text) or [] for r in results]
            scorer = extractive.PieceScorer(row["query"], pieces)
            texts = [[p.text for p in ps] or [r.text] for ps, r in zip(scorer.pieces, results)]
            flat = [t for ts in texts for t in ts]
            t0 = time.perf_counter()
            q = await expander.Embed(expander_pb2.EmbedRequest(texts=[row["query"]], kind=expander_pb2.EMBED_KIND_QUERY), timeout=120)
            vectors = []
            for at in range(0, len(flat), 256):
                p = await expander.Embed(expander_pb2.EmbedRequest(texts=flat[at:at + 256], kind=expander_pb2.EMBED_KIND_PASSAGE),
                                         timeout=300)
                vectors.extend(np.array(v.values, dtype=np.float32) for v in p.vectors)
            embed_ms.append((time.perf_counter() - t0) * 1000)
            qv = np.array(q.vectors[0].values, dtype=np.float32)
            sims = np.array([float(np.dot(qv, v)) for v in vectors])
            cosines, coverages, at = [], [], 0
            for ps, ts in zip(scorer.pieces, texts):
                cosines.append(sims[at:at + len(ts)])
                coverages.append(np.array([scorer.score(p) for p in ps] or [0.0]))
                at += len(ts)
            fused = np.array([r.fused_score for r in results], dtype=float)
            ranks["graphmesh"][name][qid] = first_gold_rank(keys, gold)
            for m in mixes:
                hybrid = minmax(chunk_scores(cosines, coverages, m))
                for w in weights:
                    order = np.argsort(-(fused + w * hybrid), kind="stable")
                    ranks[f"fused+a{m}w{w}"][name][qid] = first_gold_rank([keys[i] for i in order], gold)
    cross_validate(ranks, grid, sets)
    systems.append("fused+cv")
    report: dict = {"args": vars(args), "piece_embed_ms_p50": float(np.median(embed_ms)),
                    "sets": report_sets(ranks, ["graphmesh", "fused+cv"], sets)}
    print(f"piece embedding p50 {report['piece_embed_ms_p50']:.0f} ms per question (cache as it was)")
    return report


def main() -> None:
    probe_main(__doc__, "sentence_hybrid_probe", run, "0.5,1,2", lambda p: p.add_argument("--mix", default="0.5,1,2"))


if __name__ == "__main__":
    main()
