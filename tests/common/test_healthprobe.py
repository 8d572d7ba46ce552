"""The container health probe (python -m services.common.healthprobe)
against a real grpc.aio health service on loopback."""
from __future__ import annotations

import asyncio
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from services.common.healthprobe import check
from tests.fixtures.mesh import free_port

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


async def test_probe_follows_the_serving_status_and_fails_when_nothing_listens():
    srv = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    await srv.start()
    address = f"127.0.0.1:{port}"
    try:
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        await servicer.set("test.Svc", health_pb2.HealthCheckResponse.NOT_SERVING)
        assert await asyncio.to_thread(check, address) == (True, "SERVING")
        assert await asyncio.to_thread(check, address, "test.Svc") == (False, "NOT_SERVING")
        assert await asyncio.to_thread(check, address, "no.Such") == (False, "NOT_FOUND")
        ok = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "services.common.healthprobe", address],
                                     capture_output=True, text=True, timeout=30)
        assert ok.returncode == 0 and "SERVING" in ok.stdout
        await servicer.enter_graceful_shutdown()  # what a draining service does on SIGTERM
        assert await asyncio.to_thread(check, address) == (False, "NOT_SERVING")
    finally:
        await srv.stop(0)
    down = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "services.common.healthprobe", f"127.0.0.1:{free_port()}", "--timeout", "1"],
                                   capture_output=True, text=True, timeout=30)
    assert down.returncode == 1 and "UNAVAILABLE" in down.stdout
