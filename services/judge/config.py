"""Judge settings (environment prefix GRAPHMESH_JUDGE_)."""
from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings


class JudgeSettings(ServiceSettings):
    """Attributes:
    max_k: largest accepted cut-off k.
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_JUDGE_", extra="ignore")

    port: int = DEFAULT_PORTS["judge"]
    max_k: int = 100
