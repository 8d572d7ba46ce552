"""The stack's default mesh against the same mesh with one thing switched
off, in the same run, on the running local stack (`graphmesh up`).

Beside the stack's gateway the bench starts a second gateway ("off") over
the same services, or over a second copy of one service, with one setting
changed (--variant):

- ``overlap``: the gateway's keyword channels wait for the query embedding
  (GRAPHMESH_GATEWAY_OVERLAP_QUERY_EMBEDDING=false; docs/retrieval.md,
  "Keyword channels before the query embedding");
- ``keyword-cache``: a second retriever_pg ranks keyword queries in SQL
  (GRAPHMESH_RETRIEVER_PG_STORE__KEYWORD_CACHE_MB=0; docs/retrieval.md,
  "Keyword postings in memory"), the second gateway's retriever;
- ``sentence-cache``: the second gateway keeps no sentence vectors in its
  memory and asks the expander for every ``sentence.maxsim`` sentence
  (GRAPHMESH_GATEWAY_SENTENCE_CACHE_MB=0; docs/retrieval.md, "Sentence
  vectors in the gateway's memory").

At concurrency 1 every question is sent to both, cold (a fresh prefix each,
so neither finds its embedding cached), the order of the two alternating;
printed: p50 / p95 / mean of each and the paired difference (on minus off)
with a bootstrap 95% interval of the difference of medians and of means.
Then each gateway takes closed-loop cold load at --concurrency for --block
seconds, in turns (on, off, on, off), and its requests per second are
printed per block.

    graphmesh up
    python bench/mesh_ab.py --variant overlap|keyword-cache|sentence-cache [--questions 389] [--concurrency 8] [--block 20]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import LAW_DEV, REPO, SHARED_DATA, percentiles, save, stack_dsn, stop_processes  # noqa: E402

import grpc  # noqa: E402
import numpy as np  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.stack import StackConfig, check_health, service_env, state_dir, use_local_mesh_token  # noqa: E402

ON = "127.0.0.1:50051"
OFF_PORT, OFF_METRICS = 60151, 61151
OFF = f"127.0.0.1:{OFF_PORT}"
CONSULT_DEV = SHARED_DATA / "law-zh" / "queries-consult-dev.jsonl"


OFF_RETRIEVER_PG_PORT, OFF_RETRIEVER_PG_METRICS = 60152, 61152

#: variant -> (environment of the "off" side, whether it has its own retriever_pg)
VARIANTS = {
    "overlap": ({"GRAPHMESH_GATEWAY_OVERLAP_QUERY_EMBEDDING": "false"}, False),
    "keyword-cache": ({"GRAPHMESH_RETRIEVER_PG_STORE__KEYWORD_CACHE_MB": "0"}, True),
    "sentence-cache": ({"GRAPHMESH_GATEWAY_SENTENCE_CACHE_MB": "0"}, False),
}


def spawn(module: str, env: dict[str, str], log_path: Path) -> subprocess.Popen:
    log = open(log_path, "ab")
    return subprocess.Popen([sys.executable, "-m", module], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def spawn_off_side(variant: str, env: dict[str, str], logs: Path) -> list[tuple[subprocess.Popen, str]]:
    """The "off" gateway (no REST), and the retriever_pg it uses when the
    variant has one of its own: [(process, address)], the gateway last."""
    changed, own_retriever = VARIANTS[variant]
    env = {**env, **changed}
    started = []
    if own_retriever:
        env.update({"GRAPHMESH_RETRIEVER_PG_PORT": str(OFF_RETRIEVER_PG_PORT),
                    "GRAPHMESH_RETRIEVER_PG_METRICS_PORT": str(OFF_RETRIEVER_PG_METRICS),
                    "GRAPHMESH_RETRIEVER_PG_ADDR": f"127.0.0.1:{OFF_RETRIEVER_PG_PORT}"})
        started.append((spawn("services.retriever_pg", env, logs / f"{variant}-off-retriever_pg.log"),
                        f"127.0.0.1:{OFF_RETRIEVER_PG_PORT}"))
    env.update({"GRAPHMESH_GATEWAY_PORT": str(OFF_PORT), "GRAPHMESH_GATEWAY_METRICS_PORT": str(OFF_METRICS),
                "GRAPHMESH_GATEWAY_REST__PORT": "-1"})
    started.append((spawn("services.gateway", env, logs / f"{variant}-off-gateway.log"), OFF))
    return started


async def search_ms(stub, query: str) -> float:
    started = time.perf_counter()
    await stub.Search(gateway_pb2.SearchRequest(query=f"{uuid.uuid4().hex[:6]} {query}", top_k=10), timeout=30)
    return (time.perf_counter() - started) * 1000


async def paired(questions: list[str]) -> tuple[list[float], list[float]]:
    """Per question, the cold Search latency through each gateway (ms)."""
    async with grpc.aio.insecure_channel(ON) as a, grpc.aio.insecure_channel(OFF) as b:
        stubs = {"on": gateway_pb2_grpc.GatewayServiceStub(a), "off": gateway_pb2_grpc.GatewayServiceStub(b)}
        for name in stubs:  # warm-up: connections, first-call paths
            for q in questions[:5]:
                await search_ms(stubs[name], q)
        on, off = [], []
        for i, q in enumerate(questions):
            order = ("on", "off") if i % 2 == 0 else ("off", "on")
            got = {name: await search_ms(stubs[name], q) for name in order}
            on.append(got["on"])
            off.append(got["off"])
    return on, off


async def closed_loop(address: str, seconds: float, concurrency: int, questions: list[str]) -> float:
    """Requests per second of a cold closed loop against ``address``."""
    done = 0
    end = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(address) as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)

        async def worker(w: int) -> None:
            nonlocal done
            i = w
            while time.monotonic() < end:
                await search_ms(stub, questions[i % len(questions)])
                done += 1
                i += concurrency

        started = time.monotonic()
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        return done / (time.monotonic() - started)


def bootstrap(on: list[float], off: list[float], stat, resamples: int = 5000, seed: int = 7) -> dict:
    """stat(on) - stat(off) and its 95% interval over questions resampled in pairs."""
    a, b = np.asarray(on), np.asarray(off)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(resamples, len(a)))
    deltas = np.array([stat(a[i]) - stat(b[i]) for i in idx])
    return {"delta": round(float(stat(a) - stat(b)), 2),
            "ci95": [round(float(np.percentile(deltas, 2.5)), 2), round(float(np.percentile(deltas, 97.5)), 2)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=sorted(VARIANTS), required=True, help="what the second gateway has off")
    parser.add_argument("--questions", type=int, default=389, help="scenario then consult dev questions, shuffled")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--block", type=float, default=20.0, help="seconds of each closed-loop block (0: none)")
    args = parser.parse_args()
    use_local_mesh_token()
    questions = [json.loads(line)["query"] for path in (LAW_DEV, CONSULT_DEV) for line in open(path, encoding="utf-8")]
    random.Random(12).shuffle(questions)
    questions = questions[: args.questions]
    env = service_env(StackConfig(), stack_dsn(), f"bolt://127.0.0.1:{StackConfig().neo4j_bolt_port}")
    procs = spawn_off_side(args.variant, env, state_dir() / "logs")
    try:
        deadline = time.monotonic() + 120
        for proc, address in procs:
            while not check_health(address):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{address} did not start: see .graphmesh/logs/{args.variant}-off-*.log")
                time.sleep(0.5)
        on, off = asyncio.run(paired(questions))
        blocks = []
        for turn in range(2 if args.block > 0 else 0):
            for name, address in (("on", ON), ("off", OFF)):
                rate = asyncio.run(closed_loop(address, args.block, args.concurrency, questions))
                blocks.append({"gateway": name, "turn": turn, "req_per_s": round(rate, 1)})
    finally:
        stop_processes(proc for proc, _ in reversed(procs))
    report = {
        "variant": args.variant,
        "questions": len(questions),
        "concurrency_1": {"on": percentiles(on), "off": percentiles(off),
                          "p50_delta_ms": bootstrap(on, off, np.median), "mean_delta_ms": bootstrap(on, off, np.mean),
                          "on_faster": sum(x < y for x, y in zip(on, off))},
        "closed_loop": {"concurrency": args.concurrency, "block_s": args.block, "blocks": blocks,
                        "on_mean_req_per_s": round(statistics.mean(b["req_per_s"] for b in blocks if b["gateway"] == "on"), 1)
                        if blocks else None,
                        "off_mean_req_per_s": round(statistics.mean(b["req_per_s"] for b in blocks if b["gateway"] == "off"), 1)
                        if blocks else None},
    }
    save(f"mesh_ab_{args.variant.replace('-', '_')}", report)


if __name__ == "__main__":
    main()
