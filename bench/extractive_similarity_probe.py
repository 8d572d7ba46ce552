"""Probe (not a test): does the question-sentence dense similarity make the
extractive answer quote the answering passage more often? Over a running
stack with the documents dev set ingested (``--collection``, default
designdocs), client-side: Search (top 10) gives the packed context; the
extractive answer (services.gateway.answer.grounding.extractive_answer) is
built from it without and with the similarity of every sentence of the top
20 results (passage-side e5 vectors from the expander, cosine to the
query-side vector, as the sentence MaxSim stage computes them), at each
``--weights`` value of SIMILARITY_WEIGHT. Counts the answers that quote a
gold passage, with a paired bootstrap interval against no similarity.

    python bench/extractive_similarity_probe.py [--weights 0.25,0.5,1,2]
"""
from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import save  # noqa: E402

import numpy as np  # noqa: E402

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc  # noqa: E402
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.evaluate import _squeeze, gold_passages, load_dataset  # noqa: E402
from services.cli.significance import paired_delta  # noqa: E402
from services.cli.stack import use_local_mesh_token  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.gateway.answer import grounding  # noqa: E402
from services.gateway.search.sentence_maxsim import sentence_units  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "tests" / "quality" / "data" / "queries-docs-dev.jsonl"


async def run(args) -> dict:
    use_local_mesh_token()
    addresses = MeshAddresses()
    weights = [float(w) for w in args.weights.split(",")]
    quoted: dict[str, list[float]] = {"none": [], **{str(w): [] for w in weights}}
    async with channel(addresses.gateway_addr) as gch, channel(addresses.expander_addr) as ech:
        gateway = gateway_pb2_grpc.GatewayServiceStub(gch)
        expander = expander_pb2_grpc.ExpanderServiceStub(ech)
        for row in load_dataset(DOCS, args.limit or None):
            reply = await gateway.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=20,
                                                                  collections=[args.collection]), timeout=120)
            blocks = len(re.findall(r"^\[\d+\] ", reply.context, flags=re.M))
            texts = grounding.packed_texts(reply.context, blocks) or []
            units = [u for r in reply.results for u in sentence_units(r.text)]
            q = await expander.Embed(expander_pb2.EmbedRequest(texts=[row["query"]], kind=expander_pb2.EMBED_KIND_QUERY), timeout=60)
            p = await expander.Embed(expander_pb2.EmbedRequest(texts=units, kind=expander_pb2.EMBED_KIND_PASSAGE), timeout=300)
            qv = np.array(q.vectors[0].values, dtype=np.float32)
            similarity = {u: float(np.dot(qv, np.array(v.values, dtype=np.float32))) for u, v in zip(units, p.vectors)}
            golds = [_squeeze(g) for g in gold_passages(row)]

            def quotes(answer: str) -> float:
                return float(any(g in _squeeze(answer) for g in golds))

            quoted["none"].append(quotes(grounding.extractive_answer(texts, row["query"])))
            for w in weights:
                grounding.SIMILARITY_WEIGHT = w
                quoted[str(w)].append(quotes(grounding.extractive_answer(texts, row["query"], similarity=similarity)))
    report = {"args": vars(args), "n": len(quoted["none"]), "quoted": {k: int(sum(v)) for k, v in quoted.items()}, "delta": {}}
    print(f"quoted without similarity: {report['quoted']['none']} of {report['n']}")
    for w in weights:
        d = paired_delta(quoted["none"], quoted[str(w)])
        report["delta"][str(w)] = d.as_dict()
        print(f"  weight {w}: {report['quoted'][str(w)]} of {report['n']}, share {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collection", default="designdocs")
    parser.add_argument("--weights", default="0.25,0.5,1,2")
    parser.add_argument("--limit", type=int, default=0)
    save("extractive_similarity_probe", asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
