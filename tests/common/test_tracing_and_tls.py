"""Tracing and transport security of real service processes and servers:
spans reach an OTLP collector with the trace id the gateway returned, and
a service under mTLS answers only TLS callers that present a certificate
its CA signed."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
import trustme
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from graphmesh.fuser.v1 import fuser_pb2, fuser_pb2_grpc
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.clients import channel
from services.common.server import create_server
from services.common.settings import TlsSettings
from services.fuser.server import build as build_fuser
from tests.test_service_processes import READY, read_until
from tests.fixtures.mesh import refused_address

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]
REPO = Path(__file__).resolve().parents[2]


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP trace collector keeping what it is sent."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str]] = []  # (service.name, trace id hex, span name)
        self.arrived = asyncio.Event()

    async def Export(self, request, context):
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.append((attributes.get("service.name", ""), span.trace_id.hex(), span.name))
        self.arrived.set()
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest_asyncio.fixture(loop_scope="session")
async def collector():
    server = grpc.aio.server()
    sink = Collector()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(sink, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield sink, f"http://127.0.0.1:{port}"
    await server.stop(0)


async def test_gateway_spans_reach_the_collector_with_the_returned_trace_id(collector):
    sink, endpoint = collector
    dead = refused_address()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRAPHMESH_GATEWAY_PORT": "0", "GRAPHMESH_GATEWAY_METRICS_PORT": "0",
           "GRAPHMESH_GATEWAY_REST__PORT": "-1", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100",
           **{f"GRAPHMESH_{s}_ADDR": dead for s in ("EXPANDER", "RETRIEVER_PG", "RETRIEVER_GRAPH", "RERANKER", "FUSER")}}
    proc = subprocess.Popen([sys.executable, "-m", "services.gateway"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        match, lines = await asyncio.to_thread(read_until, proc, READY, 120)
        assert match, "".join(lines[-30:])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{match.group(2)}") as ch:
            call = gateway_pb2_grpc.GatewayServiceStub(ch).Search(gateway_pb2.SearchRequest(query="测试"), timeout=30)
            with pytest.raises(grpc.aio.AioRpcError):
                await call  # no downstream service runs: UNAVAILABLE, traced all the same
            trace_id = dict(await call.initial_metadata())["x-trace-id"]
        while not any(t == trace_id and name.endswith("/Search") for _, t, name in sink.spans):
            sink.arrived.clear()
            await asyncio.wait_for(sink.arrived.wait(), 60)
        in_trace = [(svc, name) for svc, t, name in sink.spans if t == trace_id]
        assert ("graphmesh-gateway", "/graphmesh.gateway.v1.GatewayService/Search") in in_trace
        # the downstream calls are child spans of the same trace
        assert any(name.endswith("ExpanderService/Expand") for _, name in in_trace), (in_trace, sink.spans)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, TlsSettings]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate,
    as the TlsSettings of the server, a client with its certificate, and a
    client with none."""
    ca = trustme.CA()
    root = tmp_path_factory.mktemp("pki")
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    for name, cert in (("server", ca.issue_cert("127.0.0.1", "localhost")), ("client", ca.issue_cert("client.graphmesh"))):
        cert.private_key_pem.write_to_path(str(root / f"{name}.key"))
        cert.cert_chain_pems[0].write_to_path(str(root / f"{name}.pem"))
    ca_file = str(root / "ca.pem")
    return {
        "server": TlsSettings(cert_file=str(root / "server.pem"), key_file=str(root / "server.key"), ca_file=ca_file, client_auth=True),
        "client": TlsSettings(cert_file=str(root / "client.pem"), key_file=str(root / "client.key"), ca_file=ca_file, client_auth=True),
        "anonymous": TlsSettings(cert_file=str(root / "client.pem"), ca_file=ca_file, client_auth=False),
    }


async def test_mtls_service_answers_only_certified_tls_clients(pki):
    service, _ = await build_fuser()
    server, port, _ = await create_server(service, "127.0.0.1", 0, pki["server"])
    request = fuser_pb2.FuseRequest(query="测试", top_k=1)
    try:
        async with channel(f"127.0.0.1:{port}", pki["client"]) as ch:
            reply = await fuser_pb2_grpc.FuserServiceStub(ch).Fuse(request, timeout=10)
            assert reply.context is not None
        for settings in (pki["anonymous"], TlsSettings()):  # TLS without a certificate; plaintext
            async with channel(f"127.0.0.1:{port}", settings) as ch:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await fuser_pb2_grpc.FuserServiceStub(ch).Fuse(request, timeout=10)
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await server.stop(0)


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")  # the module's asyncio mark; this one is sync
def test_the_detach_error_of_a_cancelled_call_is_dropped_and_others_kept():
    import logging
    import sys

    from services.common.tracing import CancelledDetachFilter

    def record(error: Exception) -> logging.LogRecord:
        try:
            raise error
        except type(error):
            info = sys.exc_info()
        return logging.LogRecord("opentelemetry.context", logging.ERROR, __file__, 1, "Failed to detach context", (), info)

    keep = CancelledDetachFilter().filter
    assert not keep(record(ValueError("<Token var=<ContextVar name='current_context'>> was created in a different Context")))
    assert keep(record(RuntimeError("something else")))
    assert keep(record(ValueError("another value error")))
