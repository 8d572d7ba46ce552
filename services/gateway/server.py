"""Builds the gateway service: gRPC API plus the REST transcoder."""
from __future__ import annotations

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.server import Service
from services.common.settings import MeshAddresses
from services.gateway.config import GatewaySettings
from services.gateway.pipeline import Pipeline
from services.gateway.rest import run_rest
from services.gateway.servicer import GatewayServicer


def build(settings: GatewaySettings | None = None, addresses: MeshAddresses | None = None) -> tuple[Service, GatewaySettings]:
    """Returns the gateway Service and its settings. The REST transcoder runs
    beside the gRPC server unless ``rest_port`` is -1."""
    settings = settings or GatewaySettings()
    pipeline = Pipeline(settings, addresses or MeshAddresses())
    servicer = GatewayServicer(settings, pipeline)
    extra = []
    if settings.rest_port >= 0:
        extra.append(lambda grpc_port: run_rest(grpc_port, settings.host, settings.rest_port))
    service = Service(
        name="gateway",
        full_names=[gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"].full_name],
        register=lambda server: gateway_pb2_grpc.add_GatewayServiceServicer_to_server(servicer, server),
        on_stop=pipeline.close,
        extra_tasks=extra,
    )
    return service, settings
