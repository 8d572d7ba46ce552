"""Builds the fuser service."""
from __future__ import annotations

from graphmesh.fuser.v1 import fuser_pb2, fuser_pb2_grpc
from services.common.server import Service
from services.fuser.config import FuserSettings
from services.fuser.entity_servicer import EntityFuserServicer


async def build(settings: FuserSettings | None = None) -> tuple[Service, FuserSettings]:
    """Returns the fuser Service and its settings."""
    settings = settings or FuserSettings()
    servicer = EntityFuserServicer(settings)
    service = Service(
        name="fuser",
        full_names=[fuser_pb2.DESCRIPTOR.services_by_name["FuserService"].full_name],
        register=lambda server: fuser_pb2_grpc.add_FuserServiceServicer_to_server(servicer, server),
    )
    return service, settings
