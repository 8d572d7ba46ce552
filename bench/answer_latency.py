"""Answer latency (benchmark, not a test): time to first token and total
time of Answer (through AnswerStream) and DeepSearch on law dev questions,
against the running stack with the local LLM (``graphmesh up --llm``, law
corpus ingested).

    python bench/answer_latency.py --dataset ../shared/data/law-zh/queries-scenario-dev.jsonl --limit 20

Answer: time to first token = first ``token`` event of AnswerStream; total =
the ``done`` event. DeepSearch is unary: its total is the reply; "time to
synthesis" = total minus the final generate stage (when the synthesis
prompt is sent). Questions run one at a time (the LLM has one slot on 2
cores). Figures are printed and saved as JSON (--out).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import grpc

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.evaluate import load_dataset
from services.common.settings import MeshAddresses


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of ``values`` (p in 0..100); nan when empty."""
    if not values:
        return float("nan")
    ranked = sorted(values)
    return ranked[min(len(ranked) - 1, max(0, int(round(p / 100 * len(ranked) + 0.5)) - 1))]


def summary(values: list[float]) -> dict[str, float]:
    """mean / p50 / p90 / max of seconds."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "mean": round(statistics.fmean(values), 2), "p50": round(percentile(values, 50), 2),
            "p90": round(percentile(values, 90), 2), "max": round(max(values), 2)}


def run_answer(stub, query: str, top_k: int, timeout: float) -> dict:
    started = time.perf_counter()
    first = None
    done = None
    for event in stub.AnswerStream(gateway_pb2.AnswerStreamRequest(query=query, top_k=top_k), timeout=timeout):
        if event.HasField("token") and first is None:
            first = time.perf_counter() - started
        if event.HasField("done"):
            done = event.done
    total = time.perf_counter() - started
    return {
        "ttft_s": first, "total_s": total, "mode": gateway_pb2.AnswerMode.Name(done.mode) if done else "",
        "strategy": gateway_pb2.FallbackStrategy.Name(done.strategy) if done else "",
        "citations": len(done.citations) if done else 0, "answer_chars": len(done.answer) if done else 0,
    }


def run_deep(stub, query: str, top_k: int, iterations: int, sub_queries: int, timeout: float) -> dict:
    started = time.perf_counter()
    reply = stub.DeepSearch(gateway_pb2.DeepSearchRequest(query=query, top_k=top_k, max_iterations=iterations, sub_queries=sub_queries), timeout=timeout)
    total = time.perf_counter() - started
    generate = next((t.duration_ms / 1000 for t in reply.answer.search.timings if t.stage == "generate"), 0.0)
    return {
        "to_synthesis_s": total - generate, "total_s": total, "iterations": len(reply.iterations),
        "stop_reason": reply.stop_reason, "evidence": len(reply.evidence_ids),
        "mode": gateway_pb2.AnswerMode.Name(reply.answer.mode),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=3, help="DeepSearch max iterations")
    parser.add_argument("--sub-queries", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per call")
    parser.add_argument("--skip-deep", action="store_true")
    parser.add_argument("--out", default="bench/results/answer_latency.json")
    args = parser.parse_args()

    dataset = load_dataset(Path(args.dataset), args.limit)
    rows: list[dict] = [{"id": item["id"], "query": item["query"]} for item in dataset]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # All Answers first, then all DeepSearches; figures are saved after every
    # call, so a run cut short still leaves what it measured.
    with grpc.insecure_channel(MeshAddresses().gateway_addr) as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for i, row in enumerate(rows, start=1):
            try:
                row["answer"] = run_answer(stub, row["query"], args.top_k, args.timeout)
            except grpc.RpcError as err:
                row["answer"] = {"error": f"{err.code().name}: {err.details()}"}
            print(f"answer {i:2d}/{len(rows)} {row['answer']}", flush=True)
            save(out, rows, args)
        if not args.skip_deep:
            for i, row in enumerate(rows, start=1):
                try:
                    row["deep"] = run_deep(stub, row["query"], args.top_k, args.iterations, args.sub_queries, args.timeout)
                except grpc.RpcError as err:
                    row["deep"] = {"error": f"{err.code().name}: {err.details()}"}
                print(f"deep {i:2d}/{len(rows)} {row['deep']}", flush=True)
                save(out, rows, args)
    print(json.dumps({k: v for k, v in save(out, rows, args).items() if k != "rows"}, ensure_ascii=False, indent=1))


def save(out: Path, rows: list[dict], args: argparse.Namespace) -> dict:
    """Summarises what has been measured so far and writes it to ``out``."""
    ok_answers = [r["answer"] for r in rows if "answer" in r and "error" not in r["answer"]]
    ok_deep = [r["deep"] for r in rows if "deep" in r and "error" not in r["deep"]]
    result = {
        "questions": len(rows),
        "answer": {
            "measured": sum("answer" in r for r in rows),
            "ttft_s": summary([a["ttft_s"] for a in ok_answers if a["ttft_s"] is not None]),
            "total_s": summary([a["total_s"] for a in ok_answers]),
            "errors": sum(1 for r in rows if "answer" in r and "error" in r["answer"]),
            "llm_answers": sum(a["mode"] == "ANSWER_MODE_LLM" for a in ok_answers),
            "strategies": {s: sum(a["strategy"] == s for a in ok_answers) for s in sorted({a["strategy"] for a in ok_answers})},
        },
        "deep": {
            "measured": sum("deep" in r for r in rows),
            "to_synthesis_s": summary([d["to_synthesis_s"] for d in ok_deep]),
            "total_s": summary([d["total_s"] for d in ok_deep]),
            "iterations_mean": round(statistics.fmean([d["iterations"] for d in ok_deep]), 2) if ok_deep else None,
            "errors": sum(1 for r in rows if "deep" in r and "error" in r["deep"]),
        },
        "settings": vars(args),
        "rows": rows,
    }
    out.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    return result


if __name__ == "__main__":
    main()
