"""A grpc.health.v1 probe for container health checks.

    python -m services.common.healthprobe [HOST:PORT] [--service NAME] [--timeout SECONDS]

Asks ``grpc.health.v1.Health/Check`` of the server at HOST:PORT (default:
``$GRAPHMESH_HEALTH_ADDR``, else 127.0.0.1:50051) and exits 0 when it answers
SERVING, 1 otherwise (NOT_SERVING, SERVICE_UNKNOWN, unreachable, timed out).
The Dockerfile's HEALTHCHECK and docker-compose.yml run it; Kubernetes uses
its native gRPC probe instead.
"""
from __future__ import annotations

import argparse
import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.clients import blocking_channel

DEFAULT_ADDR = "127.0.0.1:50051"
ENV_ADDR = "GRAPHMESH_HEALTH_ADDR"


def check(address: str, service: str = "", timeout: float = 3.0) -> tuple[bool, str]:
    """Asks the health service at ``address`` about ``service``.

    Args:
        address: "host:port" of the gRPC server.
        service: full service name; "" asks about the whole server.
        timeout: seconds for the call.
    Returns:
        (True, "SERVING") when it serves, else (False, the status name or the
        gRPC error code name). Never raises for RPC failures.
    """
    with blocking_channel(address) as channel:  # TLS per GRAPHMESH_TLS_*
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as err:
            return False, err.code().name
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return reply.status == health_pb2.HealthCheckResponse.SERVING, status


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: prints the status and returns the exit code (0 or 1)."""
    parser = argparse.ArgumentParser(prog="python -m services.common.healthprobe", description=__doc__.split("\n\n")[0])
    parser.add_argument("address", nargs="?", default=os.environ.get(ENV_ADDR) or DEFAULT_ADDR, help="host:port")
    parser.add_argument("--service", default="", help="full gRPC service name ('' = the server)")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds")
    args = parser.parse_args(argv)
    ok, status = check(args.address, args.service, args.timeout)
    print(f"{args.address} {args.service or '(server)'}: {status}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
