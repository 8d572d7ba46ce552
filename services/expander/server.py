"""Builds the expander service."""
from __future__ import annotations

from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from services.common.server import Service
from services.expander.config import ExpanderSettings
from services.expander.entity_servicer import EntityExpanderServicer


def build(settings: ExpanderSettings | None = None) -> tuple[Service, ExpanderSettings]:
    """Returns the expander Service and its settings (from the environment
    when not given)."""
    settings = settings or ExpanderSettings()
    servicer = EntityExpanderServicer(settings)
    service = Service(
        name="expander",
        full_names=[expander_pb2.DESCRIPTOR.services_by_name["ExpanderService"].full_name],
        register=lambda server: expander_pb2_grpc.add_ExpanderServiceServicer_to_server(servicer, server),
        on_start=servicer.warm_up,
        on_stop=servicer.library.close,
    )
    return service, settings
