"""Builds the reranker service."""
from __future__ import annotations

from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from services.common.server import Service
from services.reranker.config import RerankerSettings
from services.reranker.servicer import RerankerServicer


async def build(settings: RerankerSettings | None = None) -> tuple[Service, RerankerSettings]:
    """Returns the reranker Service and its settings."""
    settings = settings or RerankerSettings()
    servicer = RerankerServicer(settings)
    service = Service(
        name="reranker",
        full_names=[reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name],
        register=lambda server: reranker_pb2_grpc.add_RerankerServiceServicer_to_server(servicer, server),
    )
    return service, settings
