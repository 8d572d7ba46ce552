"""Each service runs on its own (python -m services.<name>): it serves
grpc.health.v1 with SERVING, lists its services through reflection, exposes
Prometheus metrics on its own port, and exits cleanly on SIGTERM."""
from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

pytestmark = pytest.mark.contract

REPO = Path(__file__).resolve().parents[1]
SERVICE_NAMES = {
    "gateway": "graphmesh.gateway.v1.GatewayService",
    "expander": "graphmesh.expander.v1.ExpanderService",
    "retriever_pg": "graphmesh.retriever.v1.RetrieverService",
    "retriever_graph": "graphmesh.retriever.v1.RetrieverService",
    "reranker": "graphmesh.reranker.v1.RerankerService",
    "fuser": "graphmesh.fuser.v1.FuserService",
    "judge": "graphmesh.judge.v1.JudgeService",
}
READY = re.compile(r"READY (\w+) grpc=(\d+) metrics=(\d+)")


def read_until(proc: subprocess.Popen, pattern: re.Pattern, timeout: float) -> tuple[re.Match | None, list[str]]:
    """The first line of ``proc``'s output matching ``pattern`` and the lines
    read, waiting at most ``timeout`` seconds in all (a reader thread, so a
    silent process cannot block past the deadline); (None, lines) when the
    process ends or the time runs out first."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if match := pattern.search(line):
            return match, seen
    return None, seen


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def store_env(pg_new_database, neo4j_uri) -> dict[str, str]:
    return {"GRAPHMESH_RETRIEVER_PG_DSN": await pg_new_database(), "GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI": neo4j_uri}


@contextlib.contextmanager
def service_process(name: str, env: dict[str, str]):
    """``python -m services.<name>`` on free ports with ``env`` added;
    yields (process, its READY match, the lines read until it) and kills
    the process if it is still running at the end."""
    prefix = f"GRAPHMESH_{name.upper()}"
    env = {**os.environ, **env, f"{prefix}_PORT": "0", f"{prefix}_METRICS_PORT": "0",
           "GRAPHMESH_GATEWAY_REST__PORT": "-1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", f"services.{name}"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        match, lines = read_until(proc, READY, timeout=120)
        assert match, "".join(lines[-30:])
        yield proc, match, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("name", list(SERVICE_NAMES))
def test_service_process_health_reflection_metrics_and_sigterm(name, store_env):
    with service_process(name, store_env) as (proc, match, _):
        grpc_port, metrics_port = int(match.group(2)), int(match.group(3))
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
            health = health_pb2_grpc.HealthStub(ch)
            for service in ("", SERVICE_NAMES[name]):
                reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
            services = set(ProtoReflectionDescriptorDatabase(ch).get_services())
            assert {SERVICE_NAMES[name], "grpc.health.v1.Health"} <= services
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as reply:
            metrics = reply.read().decode()
        assert 'grpc_server_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="grpc.health.v1.Health"' in metrics
        if name == "gateway":
            assert "# TYPE graphmesh_stage_duration_seconds histogram" in metrics
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


#: A home no process can create anything under, even as root: a container's
#: read-only root file system (readOnlyRootFilesystem in deploy/k8s).
UNWRITABLE_HOME = "/proc/graphmesh-no-home"


@pytest.mark.parametrize("name", list(SERVICE_NAMES))
def test_service_process_serves_with_an_unwritable_home(name, store_env, tmp_path, monkeypatch):
    for variable in ("GRAPHMESH_EXPANDER_EMBEDDING__CACHE", "GRAPHMESH_EXPANDER_EMBEDDING_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)  # the defaults, under HOME
    for variable in ("GRAPHMESH_MESH_TOKEN", "GRAPHMESH_MESH_TOKEN_FILE"):
        # a CLI test run earlier may have pointed this process at a local stack's token; the Embed below sends none
        monkeypatch.delenv(variable, raising=False)
    env = {**store_env, "HOME": UNWRITABLE_HOME, "TMPDIR": str(tmp_path)}  # TMPDIR: the pod's emptyDir at /tmp
    with service_process(name, env) as (proc, match, lines):
        with grpc.insecure_channel(f"127.0.0.1:{match.group(2)}") as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=SERVICE_NAMES[name]), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            if name == "expander":
                from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc

                vectors = expander_pb2_grpc.ExpanderServiceStub(ch).Embed(
                    expander_pb2.EmbedRequest(texts=["劳动合同"], kind=expander_pb2.EMBED_KIND_QUERY), timeout=60).vectors
                assert len(vectors) == 1 and len(vectors[0].values) == 384
                assert any("embedding cache off" in line for line in lines), "".join(lines[-30:])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
