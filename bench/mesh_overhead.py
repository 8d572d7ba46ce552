"""Mesh overhead benchmark (not a test): the same Search flow
(services.gateway.search.pipeline.SearchFlow: expand -> both retrievers -> fuse) run
in one run two ways, per query alternately:

- grpc: its clients are the gRPC adapters calling the running services over
  loopback (what the gateway does);
- in-process: its clients call the same servicer objects, built here
  against the same PostgreSQL and Neo4j, directly (no serialisation, no
  network).

Prints p50/p95 of each and the ratio grpc / in-process. The gateway's own
Search RPC is measured too, for reference. Needs `graphmesh up` with a
corpus ingested (stores are found as `graphmesh up` starts them:
GRAPHMESH_HOME/pgdata and GRAPHMESH_NEO4J_BOLT_PORT, or the _DSN/_URI
settings).

    python bench/mesh_overhead.py [--queries 60]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import LAW_DEV, percentiles, save  # noqa: E402

import grpc  # noqa: E402

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402
from services.cli.evaluate import load_dataset  # noqa: E402
from services.common.settings import MeshAddresses  # noqa: E402
from services.gateway.config import GatewaySettings  # noqa: E402
from services.gateway.downstream.grpc_adapters import GrpcExpander, GrpcFuser, GrpcReranker, GrpcRetriever  # noqa: E402
from services.gateway.downstream.guard import Deadline  # noqa: E402
from services.gateway.search.pipeline import SearchFlow  # noqa: E402


class _Capture:
    """Stands in for a grpc server to collect a service's method handlers."""

    def __init__(self) -> None:
        self.handlers: dict = {}

    def add_generic_rpc_handlers(self, _handlers) -> None:
        pass

    def add_registered_method_handlers(self, _service: str, handlers: dict) -> None:
        self.handlers.update(handlers)


class _Context:
    def time_remaining(self):
        return None


class DirectClient:
    """A gateway client (services.gateway.downstream.interfaces) calling a servicer's
    methods directly: ``retrieve(request, timeout)`` -> ``Retrieve``."""

    def __init__(self, name: str, handlers: dict) -> None:
        self.name = name
        for rpc, handler in handlers.items():
            snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in rpc).lstrip("_")
            setattr(self, snake, self._wrap(handler.unary_unary))

    @staticmethod
    def _wrap(fn):
        async def call(request, timeout=None):
            return await fn(request, _Context())

        return call


async def in_process_stubs() -> tuple[dict[str, DirectClient], list]:
    """Builds expander, both retrievers, reranker and fuser in this process."""
    from services.expander.server import build as build_expander
    from services.fuser.server import build as build_fuser
    from services.reranker.server import build as build_reranker
    from services.retriever_graph.config import RetrieverGraphSettings
    from services.retriever_graph.server import build as build_graph
    from services.retriever_pg.config import RetrieverPgSettings
    from services.retriever_pg.embedded import embedded_dsn
    from services.retriever_pg.server import build as build_pg

    home = Path(os.environ.get("GRAPHMESH_HOME", ".graphmesh")).resolve()
    pg = RetrieverPgSettings()
    dsn = pg.dsn or embedded_dsn(home / "pgdata")
    graph = RetrieverGraphSettings()
    uri = graph.neo4j_uri or f"bolt://127.0.0.1:{os.environ.get('GRAPHMESH_NEO4J_BOLT_PORT', '7687')}"
    services = {
        "expander": (await build_expander())[0], "fuser": (await build_fuser())[0], "reranker": (await build_reranker())[0],
        "retriever_pg": (await build_pg(RetrieverPgSettings(dsn=dsn)))[0],
        "retriever_graph": (await build_graph(RetrieverGraphSettings(neo4j={"uri": uri})))[0],
    }
    stubs = {}
    for name, service in services.items():
        if service.on_start is not None:
            await service.on_start()
        capture = _Capture()
        service.register(capture)
        stubs[name] = DirectClient(name, capture.handlers)
    return stubs, list(services.values())


async def run(queries: list[str], top_k: int) -> dict:
    settings = GatewaySettings()
    a = MeshAddresses()
    clients = [GrpcExpander(a.expander_addr), GrpcRetriever("retriever_pg", a.retriever_pg_addr),
               GrpcRetriever("retriever_graph", a.retriever_graph_addr), GrpcReranker(a.reranker_addr), GrpcFuser(a.fuser_addr)]
    grpc_pipeline = SearchFlow(settings, clients[0], clients[1:3], clients[3], clients[4])
    stubs, services = await in_process_stubs()
    direct = SearchFlow(settings, stubs["expander"], [stubs["retriever_pg"], stubs["retriever_graph"]], stubs["reranker"], stubs["fuser"])
    times: dict[str, list[float]] = {"grpc": [], "in_process": [], "gateway_rpc": []}
    results_equal = 0
    async with grpc.aio.insecure_channel(MeshAddresses().gateway_addr) as ch:
        gateway = gateway_pb2_grpc.GatewayServiceStub(ch)
        for q in queries[:3]:  # warm-up: model load, pools, caches
            await direct.search(q, top_k, None, Deadline(60))
            await grpc_pipeline.search(q, top_k, None, Deadline(60))
        for i, q in enumerate(queries):
            order = ("grpc", "in_process") if i % 2 == 0 else ("in_process", "grpc")
            ids = {}
            for mode in order:
                pipe = grpc_pipeline if mode == "grpc" else direct
                started = time.perf_counter()
                outcome = await pipe.search(q, top_k, None, Deadline(60))
                times[mode].append((time.perf_counter() - started) * 1000)
                ids[mode] = [c.id for c in outcome.response.results]
            results_equal += ids["grpc"] == ids["in_process"]
            started = time.perf_counter()
            await gateway.Search(gateway_pb2.SearchRequest(query=q, top_k=top_k), timeout=60)
            times["gateway_rpc"].append((time.perf_counter() - started) * 1000)
    for client in clients:
        await client.close()
    for service in services:
        if service.on_stop is not None:
            await service.on_stop()
    stats = {m: percentiles(v) for m, v in times.items()}
    return {
        "queries": len(queries), "top_k": top_k, "same_results": results_equal, "latency_ms": stats,
        "ratio_p50_grpc_over_in_process": round(stats["grpc"]["p50"] / stats["in_process"]["p50"], 3),
        "ratio_mean_grpc_over_in_process": round(stats["grpc"]["mean"] / stats["in_process"]["mean"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(LAW_DEV))
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--top-k", type=int, default=10)
    args = parser.parse_args()
    queries = [r["query"] for r in load_dataset(Path(args.dataset), args.queries)]
    save("mesh_overhead", {"dataset": Path(args.dataset).name, **asyncio.run(run(queries, args.top_k))})


if __name__ == "__main__":
    main()
