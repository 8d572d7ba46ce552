"""Two replicas of the expander and of the PostgreSQL retriever behind one
gateway (issue 27 item 6), on the running local stack: does the load split,
and does the death of one replica cost any request?

Next to `graphmesh up`'s services the bench starts a second expander and a
second retriever_pg (the same stores) and a second gateway whose addresses
list both replicas ("ipv4:127.0.0.1:50052,127.0.0.1:60052"; the client
balances round robin, services.common.clients.SERVICE_CONFIG). Closed-loop
Search load (fresh query text, so every query is embedded) runs against
that gateway; after --before seconds the second replicas are killed with
SIGKILL and the load goes on for --after seconds. Printed: per replica the
RPCs it served in each phase (from its own grpc_server_handled_total), and
per phase the requests, errors and degraded answers.

    graphmesh up
    python bench/replicas.py [--before 15] [--after 15] [--concurrency 4]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import LAW_DEV, REPO, save, stack_dsn, stop_processes  # noqa: E402

import grpc  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.stack import StackConfig, check_health, service_env, state_dir, use_local_mesh_token  # noqa: E402

#: gRPC port, metrics port of each extra process.
EXTRA = {"expander": (60052, 61052), "retriever_pg": (60053, 61053), "gateway": (60051, 61051)}
STACK = {"expander": (50052, 51052), "retriever_pg": (50053, 51053)}
REST_PORT = 18080


def served(metrics_port: int, service: str) -> int:
    """RPCs of ``service`` (e.g. "graphmesh.expander.v1.ExpanderService") a
    process has completed, from its Prometheus endpoint; -1 when it is gone."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2).read().decode()
    except OSError:
        return -1
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("grpc_server_handled_total{") and f'grpc_service="{service}"' in line))


def spawn(name: str, env: dict[str, str], logs: Path) -> subprocess.Popen:
    port, metrics = EXTRA[name]
    prefix = f"GRAPHMESH_{name.upper()}"
    env = {**env, f"{prefix}_PORT": str(port), f"{prefix}_METRICS_PORT": str(metrics)}
    if name == "gateway":
        env["GRAPHMESH_GATEWAY_REST__PORT"] = str(REST_PORT)
        for service, (stack_port, _) in STACK.items():
            env[f"GRAPHMESH_{service.upper()}_ADDR"] = f"ipv4:127.0.0.1:{stack_port},127.0.0.1:{EXTRA[service][0]}"
    log = open(logs / f"replica-{name}.log", "ab")
    return subprocess.Popen([sys.executable, "-m", f"services.{name}"], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


async def load(seconds: float, concurrency: int, questions: list[str], tag: str) -> list[tuple[str, tuple]]:
    """(status code name, degraded services) of each request of a closed loop."""
    out: list[tuple[str, tuple]] = []
    end = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(f"127.0.0.1:{EXTRA['gateway'][0]}") as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)

        async def worker(w: int) -> None:
            i = 0
            while time.monotonic() < end:
                query = f"{tag}{w}-{i} {questions[(w * 997 + i) % len(questions)]}"
                i += 1
                try:
                    reply = await stub.Search(gateway_pb2.SearchRequest(query=query, top_k=5), timeout=10)
                    out.append(("OK", tuple(reply.degraded)))
                except grpc.aio.AioRpcError as err:
                    out.append((err.code().name, ()))

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return out


def summary(samples: list[tuple[str, tuple]]) -> dict:
    return {"requests": len(samples), "errors": dict(Counter(c for c, _ in samples if c != "OK")),
            "degraded": dict(Counter(d for c, ds in samples if c == "OK" for d in ds))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=float, default=15.0)
    parser.add_argument("--after", type=float, default=15.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    use_local_mesh_token()
    pg_dsn = stack_dsn()
    env = service_env(StackConfig(), pg_dsn, f"bolt://127.0.0.1:{StackConfig().neo4j_bolt_port}")
    logs = state_dir() / "logs"
    questions = [json.loads(line)["query"] for line in open(LAW_DEV, encoding="utf-8")]
    names = {"expander": "graphmesh.expander.v1.ExpanderService", "retriever_pg": "graphmesh.retriever.v1.RetrieverService"}
    procs = {name: spawn(name, env, logs) for name in ("expander", "retriever_pg")}
    try:
        for name in procs:
            while not check_health(f"127.0.0.1:{EXTRA[name][0]}"):
                time.sleep(0.5)
        procs["gateway"] = spawn("gateway", env, logs)
        while not check_health(f"127.0.0.1:{EXTRA['gateway'][0]}"):
            time.sleep(0.5)
        asyncio.run(load(2.0, 1, questions, "warm"))

        def counts() -> dict:
            return {f"{n}:{which}": served(ports[n][1], names[n])
                    for n in names for which, ports in (("stack", STACK), ("replica", EXTRA))}

        start = counts()
        before = asyncio.run(load(args.before, args.concurrency, questions, "before"))
        mid = counts()
        for name in ("expander", "retriever_pg"):
            os.kill(procs[name].pid, signal.SIGKILL)
        after = asyncio.run(load(args.after, args.concurrency, questions, "after"))
        end = counts()
    finally:
        stop_processes(procs.values())
    report = {
        "concurrency": args.concurrency,
        "both_replicas": {**summary(before), "seconds": args.before,
                          "served": {k: mid[k] - start[k] for k in start}},
        "one_replica_killed": {**summary(after), "seconds": args.after,
                               "served": {k: (end[k] - mid[k]) if end[k] >= 0 else "killed" for k in start}},
    }
    for phase in ("both_replicas", "one_replica_killed"):
        entry = report[phase]
        print(f"{phase}: {entry['requests']} Search in {entry['seconds']:.0f} s, errors {entry['errors'] or 0}, "
              f"degraded {entry['degraded'] or 0}; RPCs served {entry['served']}")
    save("replicas", report)


if __name__ == "__main__":
    main()
