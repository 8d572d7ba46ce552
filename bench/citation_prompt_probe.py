"""Which packed source the local LLM cites, under prompt variants (issue 29;
a probe, not a test).

For a fixed-seed sample of a law dev set (the answer_quality sample: seed
12), each question is searched once through the gateway (the exact packed
context and its citation order), then answered by the local llama.cpp server
under each arm, with the citation grammar as ``graphmesh up --llm`` sends
it. It counts, per arm, the answers whose raw marks name the gold article
(before any verification), the marks per answer, the prompt's tokens and
the time to answer (``--no-cache-prompt`` for timings: otherwise llama.cpp
reuses the previous arm's common prefix).

    python bench/citation_prompt_probe.py --arms base multi --sample 40

Arms: ``base`` (the law pack's prompt today), ``multi`` (the same prompt
asking for every source that answers a part of the question, one clause
each), ``top5`` (base over the first five packed sources only).
Saves bench/results/citation_prompt_probe-<time>.json.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

import domains  # noqa: E402
from bench.abstention_fit import SETS  # noqa: E402
from bench.answer_quality import sample  # noqa: E402
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli import evaluate  # noqa: E402
from services.common.clients import channel  # noqa: E402
from services.common.packed_context import split_blocks  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.gateway.answer import grounding  # noqa: E402
from services.gateway.answer.citation_grammar import citation_grammar  # noqa: E402

_MARK = re.compile(r"\[(\d+)\]")


def arm_prompt(arm: str, prompt):
    """The law pack's prompt, changed as the arm says."""
    if arm != "multi":
        return prompt
    return replace(
        prompt,
        system_zh=prompt.system_zh.replace(
            "每句话后用[n]标注它依据的资料编号，",
            "问题涉及几条资料时，每条写一个分句并分别标注；每句话后用[n]标注它依据的资料编号，"),
        instruction_zh=("请用一到三句完整的中文句子回答，写明法律名称和条号，并在句末用方括号标注所依据资料的编号；"
                        "几条资料分别回答问题的不同方面时，逐条引用，例如：依照《某某法》第十条，某某行为应当承担相应责任[2]；"
                        "依照该法第十二条，某某可以请求赔偿[3]。"))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="scenario")
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--arms", nargs="+", default=["base", "multi"])
    parser.add_argument("--llm", default="http://127.0.0.1:50060/v1")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--no-cache-prompt", action="store_true",
                        help="llama.cpp evaluates each prompt whole (no reuse of the previous arm's prefix): for timing")
    args = parser.parse_args()
    rows = sample(evaluate.load_dataset(SETS[args.set]), args.sample, args.seed)
    stub = gateway_pb2_grpc.GatewayServiceStub(channel(MeshAddresses().gateway_addr))
    out = REPO / "bench" / "results" / f"citation_prompt_probe-{time.strftime('%Y%m%dT%H%M%S')}.json"
    record: dict = {"settings": vars(args), "rows": []}
    async with httpx.AsyncClient(timeout=300) as http:
        for row in rows:
            reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=10), timeout=60)
            packed = len(split_blocks(reply.context))
            ids = [r.document_id or r.id for r in reply.results][:packed]
            gold = {str(g) for g in row.get("gold", [])}
            gold_at = next((i + 1 for i, cid in enumerate(ids) if cid in gold), None)
            prompt = domains.answer_prompt(list(reply.query_info.domain_packs))
            entry = {"id": str(row.get("id")), "gold_at": gold_at, "arms": {}}
            for arm in args.arms:
                n = min(5, packed) if arm == "top5" else packed
                context = grounding.first_sources(reply.context, n)
                messages = grounding.build_messages(row["query"], context, arm_prompt(arm, prompt), worked_example=False)
                started = time.perf_counter()
                resp = await http.post(f"{args.llm}/chat/completions", json={
                    "messages": messages, "max_tokens": args.max_tokens, "temperature": 0.0,
                    "grammar": citation_grammar(n), "cache_prompt": not args.no_cache_prompt})
                body = resp.json()
                text = body["choices"][0]["message"]["content"]
                timings = body.get("timings", {})
                marks = [int(m) for m in _MARK.findall(text) if 1 <= int(m) <= n]
                cited = {ids[m - 1] for m in marks}
                entry["arms"][arm] = {"answer": text, "marks": marks, "gold_cited": bool(cited & gold),
                                      "seconds": round(time.perf_counter() - started, 1),
                                      "prompt_tokens": body.get("usage", {}).get("prompt_tokens"),
                                      "prompt_ms": timings.get("prompt_ms"), "predicted_ms": timings.get("predicted_ms")}
            record["rows"].append(entry)
            print(entry["id"], gold_at, {a: (v["marks"], v["gold_cited"], v["seconds"]) for a, v in entry["arms"].items()},
                  flush=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(record, ensure_ascii=False, indent=1))
    summary = {}
    for arm in args.arms:
        done = [r["arms"][arm] for r in record["rows"]]
        summary[arm] = {"gold_cited": sum(d["gold_cited"] for d in done), "n": len(done),
                        "marks_mean": round(statistics.fmean(len(set(d["marks"])) for d in done), 2),
                        "seconds_p50": statistics.median(d["seconds"] for d in done),
                        "prompt_tokens_p50": statistics.median(d["prompt_tokens"] or 0 for d in done),
                        "prompt_ms_p50": statistics.median(d["prompt_ms"] or 0 for d in done)}
    record["summary"] = summary
    out.write_text(json.dumps(record, ensure_ascii=False, indent=1))
    print(json.dumps(summary, ensure_ascii=False))
    print(f"saved to {out}")


if __name__ == "__main__":
    asyncio.run(main())
