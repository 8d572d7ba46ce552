"""Dense similarity across writing systems: how the fuser should treat a
collection that mixes English and Chinese documents (study, not a test).

Every own-document set under tests/quality/data is ingested as files in the
quality gate's in-process mesh; each question's Search (top_k 40) gives the
candidates with every channel's raw score (Candidate.channel_scores) and
its document's writing system (Candidate.script). The fuser's weighted
fusion (``services.fuser.core``: min-max per channel, the default channel
weights) is then replayed offline with each variant of the dense channels'
treatment (pg.vector, sentence.maxsim):

- ``plain``: no treatment (GraphMesh before 2026-12-06);
- ``top5``: each writing system's scores shifted so the means of its five
  best meet (``fuser.core.script_centred`` as first shipped);
- ``median``: shifted so each system's median over the candidates meets
  (the background similarity of the question to each language, not its
  best);
- ``top5-half`` / ``median-half``: half of those shifts.

Printed per set and pooled over the sets that mix two systems: R@1 / MRR@10
of the chunk holding the gold text, and **intrusions**: for questions whose
gold chunk is in the question's writing system, the mean number of chunks
of the other system among the top five (chunks a reader or the extractive
answer sees that cannot answer), with the paired difference to ``plain``.
Replaying ``plain`` reproduces the first result of a GraphMesh without the
treatment (checked on every set when first written).

    PYTHONPATH=.:gen/python python -m pytest bench/script_centring_study.py -q -s \\
        -p tests.fixtures.pg -p tests.fixtures.neo4j -p tests.fixtures.mesh
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import grpc
import numpy as np
import pytest

import bench.own_docs_naive as own_docs_naive
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import _squeeze, gold_passages, load_dataset
from services.cli.significance import paired_delta
from services.common.text import latin_script
from services.gateway.profiles import DEFAULT_WEIGHTS
from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, patient_gateway

pytestmark = [pytest.mark.asyncio(loop_scope="session")]
REPO = Path(__file__).resolve().parents[1]
#: The own-document sets of bench/own_docs_naive.py (the module, not its names: pytest would collect its test here).
SETS = own_docs_naive.SETS
DENSE = ("pg.vector", "sentence.maxsim")
VARIANTS = ("plain", "top5", "median", "top5-half", "median-half")
OUT = REPO / "bench" / "results" / "script_centring_study.json"


def shifts(cands, channel: str, variant: str) -> dict[str, float]:
    """{script: shift} of ``channel`` under ``variant`` ({} when one system or ``plain``)."""
    by_script: dict[str, list[float]] = defaultdict(list)
    for c in cands:
        for s in c.channel_scores:
            if s.channel == channel and c.script:
                by_script[c.script].append(s.score)
    if variant == "plain" or len(by_script) < 2:
        return {}
    kind, _, half = variant.partition("-")
    centre = {k: float(np.mean(sorted(v, reverse=True)[:5]) if kind == "top5" else np.median(v)) for k, v in by_script.items()}
    top = max(centre.values())
    return {k: (top - v) * (0.5 if half else 1.0) for k, v in centre.items()}


def fuse(cands, variant: str) -> list:
    """``cands`` re-ranked by the weighted fusion with ``variant``'s dense treatment."""
    shift = {ch: shifts(cands, ch, variant) for ch in DENSE}

    def score(c, s) -> float:
        return s.score + shift.get(s.channel, {}).get(c.script, 0.0)

    bounds: dict[str, list[float]] = defaultdict(list)
    for c in cands:
        for s in c.channel_scores:
            bounds[s.channel].append(score(c, s))
    lo_hi = {k: (min(v), max(v)) for k, v in bounds.items()}
    fused = []
    for c in cands:
        total = 0.0
        for s in c.channel_scores:
            lo, hi = lo_hi[s.channel]
            total += DEFAULT_WEIGHTS.get(s.channel, 1.0) * (1.0 if math.isclose(lo, hi) else (score(c, s) - lo) / (hi - lo))
        fused.append((total, c))
    return [c for _, c in sorted(fused, key=lambda x: -x[0])]


async def test_script_centring_variants(mesh):
    rows_out: dict[str, dict[str, dict]] = {v: {} for v in VARIANTS}
    mixed: list[str] = []
    async with patient_gateway(mesh) as address:
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            for name, (questions, folder) in SETS.items():
                collection = "sc" + name.replace("_", "")
                files = [gateway_pb2.IngestFile(name=f"{collection}/{p.name}", content=p.read_bytes())
                         for p in sorted(folder.iterdir()) if p.suffix in (".txt", ".md", ".pdf", ".docx", ".html") and p.stem != "README"]
                await stub.Ingest(gateway_pb2.IngestRequest(files=files, collection=collection), timeout=900)
                scripts_seen: set[str] = set()
                for v in VARIANTS:
                    rows_out[v][name] = {}
                for row in load_dataset(questions):
                    golds = [_squeeze(g) for g in gold_passages(row)]
                    reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=40, collections=[collection]),
                                              timeout=PATIENT_SECONDS)
                    cands = list(reply.results)
                    scripts_seen |= {c.script for c in cands if c.script}
                    asked = "latin" if latin_script(row["query"]) else "cjk"
                    for v in VARIANTS:
                        ranked = fuse(cands, v)
                        rank = next((i + 1 for i, c in enumerate(ranked[:10]) if any(g in _squeeze(c.text) for g in golds)), None)
                        gold_script = next((c.script for c in ranked if any(g in _squeeze(c.text) for g in golds)), "")
                        intrusions = (sum(c.script not in ("", asked) for c in ranked[:5])
                                      if gold_script == asked else None)
                        rows_out[v][name][str(row["id"])] = {"rank": rank, "intrusions": intrusions}
                if len(scripts_seen) > 1:
                    mixed.append(name)
                print(name, "mixed" if name in mixed else "one system", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"mixed": mixed, "rows": rows_out}, ensure_ascii=False), encoding="utf-8")
    report(rows_out, mixed)


def _r1(r) -> float:
    return float(r["rank"] == 1)


def _mrr(r) -> float:
    return 1.0 / r["rank"] if r["rank"] else 0.0


def report(rows: dict[str, dict[str, dict]], mixed: list[str]) -> None:
    """Per set and pooled over the mixed sets: R@1, MRR@10 and intrusions of each variant, and its
    paired difference to ``plain``."""
    groups = {**{n: [n] for n in rows["plain"]}, "mixed sets pooled": mixed}
    for group, names in groups.items():
        keys = [(n, q) for n in names for q in rows["plain"][n]]
        same = [(n, q) for n, q in keys if rows["plain"][n][q]["intrusions"] is not None]
        line = [f"{group} (n={len(keys)}, same-script gold {len(same)}):"]
        for v in VARIANTS:
            r1 = np.mean([_r1(rows[v][n][q]) for n, q in keys])
            mrr = np.mean([_mrr(rows[v][n][q]) for n, q in keys])
            intr = np.mean([rows[v][n][q]["intrusions"] or 0 for n, q in same]) if same else 0.0
            line.append(f"  {v:12s} R@1 {r1:.3f}  MRR@10 {mrr:.3f}  intrusions in top 5 {intr:.2f}")
            if v != "plain" and group == "mixed sets pooled":
                for label, fn in (("R@1", _r1), ("MRR@10", _mrr)):
                    d = paired_delta([fn(rows["plain"][n][q]) for n, q in keys], [fn(rows[v][n][q]) for n, q in keys])
                    line.append(f"      {label} minus plain {d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
                if same:
                    d = paired_delta([rows["plain"][n][q]["intrusions"] or 0 for n, q in same],
                                     [rows[v][n][q]["intrusions"] or 0 for n, q in same])
                    line.append(f"      intrusions minus plain {d.delta:+.2f} [{d.low:+.2f}, {d.high:+.2f}]")
        print("\n".join(line))
