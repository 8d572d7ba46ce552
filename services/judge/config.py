"""Judge settings (environment prefix GRAPHMESH_JUDGE_)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings
from services.judge.scoring import DEFAULT_LATENCY_BUDGETS_MS, DEFAULT_ROUNDS, DEFAULT_TOKEN_BUDGET


class JudgeSettings(ServiceSettings):
    """Attributes:
    max_k: largest accepted cut-off k.
    max_reference_chars: longest accepted reference answer (characters).
    weights: group weights of overall, keys A/B/C/D (JSON in the
        environment; default 0.40/0.35/0.25/0.00 from the MarxSphere design (docs/references.md) section 6).
    merge_policy: "max" (the reference's mergeScore) or "mean" of the rule and
        LLM scores.
    llm_rounds: LLM rounds per judgement, median taken (reference: 3).
    llm_base_url / llm_api_key / llm_model: OpenAI-compatible endpoint of the
        LLM judge; empty base URL = no LLM (LLM-only metrics NOT_COMPUTED).
    llm_timeout: seconds per LLM call.
    llm_max_retries: retries of a 429/5xx/connection failure per call.
    latency_budgets_ms: stage -> milliseconds at which the normalised latency
        is 1 (keys expand, retrieve, fuse, total, pg, graph).
    token_budget: tokens per answered question at which token efficiency is 1.
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_JUDGE_", extra="ignore")

    port: int = DEFAULT_PORTS["judge"]
    max_k: int = 100
    max_reference_chars: int = 20000
    weights: dict[str, float] = Field(default_factory=lambda: {"A": 0.40, "B": 0.35, "C": 0.25, "D": 0.0})
    merge_policy: Literal["max", "mean"] = "max"
    llm_rounds: int = Field(DEFAULT_ROUNDS, ge=1, le=9)
    llm_base_url: str = ""
    llm_api_key: str = "none"
    llm_model: str = ""
    llm_timeout: float = 60.0
    llm_max_retries: int = Field(2, ge=0, le=10)
    latency_budgets_ms: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_LATENCY_BUDGETS_MS))
    token_budget: int = Field(DEFAULT_TOKEN_BUDGET, ge=1)
