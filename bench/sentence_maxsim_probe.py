"""Probe (not a test): does the best sentence's dense similarity to the
question (MaxSim over the sentences of a chunk, bi-encoder e5 vectors) re-rank
GraphMesh's results better than the whole-chunk vector? Over a running
stack, client-side:

For each question: GraphMesh's Search top ``--depth`` (default 20); every
result cut into sentences (services.common.text.split_sentences) and each
sentence embedded passage-side by the expander (its embedding cache keeps
repeats cheap); a result's MaxSim = the largest cosine between the question's
query-side vector and its sentences. New order: by fused score (min-max over
the list) + w x MaxSim (min-max over the list), for each ``--weights``
value: what the fuser computes when the MaxSim scores come as one more
weighted channel of weight w; and by MaxSim alone. The weight is also chosen
by 5-fold cross-validation over the pooled questions (best MRR@10 on four
folds, scored on the fifth: "fused+cv"). R@1 / R@10 / MRR@10 against GraphMesh's own order, paired bootstrap.

Sets: ``docs`` (gold as text, over chunks, collection ``--docs-collection``)
and the law dev sets (over documents, the default collection).

    python bench/sentence_maxsim_probe.py [--sets docs,scenario,consult,facts] [--weights 0.5,1,2]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import first_gold_rank  # noqa: E402
from reorder_probe import each_question, probe_main, report_sets  # noqa: E402

import numpy as np  # noqa: E402

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc  # noqa: E402
from graphmesh.gateway.v1 import gateway_pb2_grpc  # noqa: E402
from services.cli.significance import rank_metric  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.common.text import split_sentences  # noqa: E402

def minmax(values: np.ndarray) -> np.ndarray:
    span = values.max() - values.min() if len(values) else 0.0
    return (values - values.min()) / span if span > 0 else np.ones_like(values)


async def run(args) -> dict:
    use_local_mesh_token()
    addresses = MeshAddresses()
    weights = [float(w) for w in args.weights.split(",")]
    systems = ["graphmesh", "maxsim", *(f"fused+{w}" for w in weights)]
    ranks: dict[str, dict[str, dict[str, int | None]]] = {s: {} for s in systems}
    embed_ms: list[float] = []
    async with channel(addresses.gateway_addr) as gch, channel(addresses.expander_addr) as ech:
        gateway = gateway_pb2_grpc.GatewayServiceStub(gch)
        expander = expander_pb2_grpc.ExpanderServiceStub(ech)
        async for name, qid, row, results, keys, gold in each_question(gateway, args, ranks):
            sentences = [[s.strip() for s in split_sentences(r.text) if len(s.strip()) >= 4] or [r.text] for r in results]
            flat = [s for ss in sentences for s in ss]
            t0 = time.perf_counter()
            q = await expander.Embed(expander_pb2.EmbedRequest(texts=[row["query"]], kind=expander_pb2.EMBED_KIND_QUERY), timeout=120)
            p = await expander.Embed(expander_pb2.EmbedRequest(texts=flat, kind=expander_pb2.EMBED_KIND_PASSAGE), timeout=300)
            embed_ms.append((time.perf_counter() - t0) * 1000)
            qv = np.array(q.vectors[0].values, dtype=np.float32)
            sims = np.array([np.dot(qv, np.array(v.values, dtype=np.float32)) for v in p.vectors])
            maxsim, at = [], 0
            for ss in sentences:
                maxsim.append(float(sims[at:at + len(ss)].max()))
                at += len(ss)
            fused = np.array([r.fused_score for r in results], dtype=float)
            ms = minmax(np.array(maxsim))
            ranks["graphmesh"][name][qid] = first_gold_rank(keys, gold)
            ranks["maxsim"][name][qid] = first_gold_rank([keys[i] for i in np.argsort(-ms, kind="stable")], gold)
            for w in weights:
                order = np.argsort(-(fused + w * ms), kind="stable")
                ranks[f"fused+{w}"][name][qid] = first_gold_rank([keys[i] for i in order], gold)
    cross_validate(ranks, weights, args.sets.split(","))
    systems.append("fused+cv")
    report: dict = {"args": vars(args), "sentence_embed_ms_p50": float(np.median(embed_ms)),
                    "sets": report_sets(ranks, systems, args.sets.split(","))}
    print(f"sentence embedding p50 {report['sentence_embed_ms_p50']:.0f} ms per question (cache as it was)")
    return report


def cross_validate(ranks: dict, weights: list[float], sets: list[str], folds: int = 5, seed: int = 0) -> None:
    """Adds ranks["fused+cv"]: each question ranked with the weight that had
    the best pooled MRR@10 on the other folds (folds drawn over all sets'
    questions together)."""
    keys = [(name, qid) for name in sets for qid in ranks["graphmesh"][name]]
    fold_of = {k: i % folds for i, k in enumerate(np.random.default_rng(seed).permutation(len(keys)))}
    fold_of = {keys[i]: f for i, f in fold_of.items()}
    ranks["fused+cv"] = {name: {} for name in sets}
    for f in range(folds):
        train = [k for k in keys if fold_of[k] != f]
        best = max(weights, key=lambda w: np.mean([rank_metric("mrr@10", ranks[f"fused+{w}"][n][q]) for n, q in train]))
        for n, q in (k for k in keys if fold_of[k] == f):
            ranks["fused+cv"][n][q] = ranks[f"fused+{best}"][n][q]
        print(f"fold {f}: weight {best}", flush=True)


def main() -> None:
    probe_main(__doc__, "sentence_maxsim_probe", run, "0.5,1,2")


if __name__ == "__main__":
    main()
