"""Builds the judge service."""
from __future__ import annotations

from graphmesh.judge.v1 import judge_pb2, judge_pb2_grpc
from services.common.server import Service
from services.judge.config import JudgeSettings
from services.judge.servicer import JudgeServicer


async def build(settings: JudgeSettings | None = None) -> tuple[Service, JudgeSettings]:
    """Returns the judge Service and its settings."""
    settings = settings or JudgeSettings()
    servicer = JudgeServicer(settings)
    service = Service(
        name="judge",
        full_names=[judge_pb2.DESCRIPTOR.services_by_name["JudgeService"].full_name],
        register=lambda server: judge_pb2_grpc.add_JudgeServiceServicer_to_server(servicer, server),
        on_stop=servicer.close,
        # every LLM call may take its whole timeout and retries: a Judge call
        # must outlive a connection closed for its age (services.common.server)
        longest_call_s=settings.llm.judgement_seconds() if settings.llm.base_url else 0.0,
    )
    return service, settings
