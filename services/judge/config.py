"""Judge settings (environment prefix GRAPHMESH_JUDGE_)."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, LlmSettings, ServiceSettings, llm_deprecated_fields
from services.judge.scoring import DEFAULT_LATENCY_BUDGETS_MS, DEFAULT_ROUNDS, DEFAULT_TOKEN_BUDGET, METRICS


class JudgeLlmSettings(LlmSettings):
    """Group ``llm`` (GRAPHMESH_JUDGE_LLM__*): the LLM judge's endpoint;
    empty base URL = no LLM (LLM-only metrics NOT_COMPUTED).

    Attributes:
        mode: "yes_no" (one yes-or-no question per metric, scored by the
            yes-probability; needs an endpoint with top_logprobs) or "json"
            (the reference's one-call JSON scores, ``rounds`` times, median
            taken). services.judge.llm says why yes_no is the default.
        rounds: JSON-mode rounds per judgement (reference: 3), each sampled
            with its own seed at ``temperature`` (0.3 by default, so that the
            rounds are independent judgements).
    """

    mode: Literal["yes_no", "json"] = "yes_no"
    temperature: float = Field(0.3, ge=0.0, le=2.0)
    rounds: int = Field(DEFAULT_ROUNDS, ge=1, le=9)

    def judgement_seconds(self) -> float:
        """Longest the LLM part of one judgement may take, seconds: its
        calls (a round each in JSON mode, a metric each in yes-no mode) run
        one after another, each within ``timeout`` (retries included)."""
        calls = self.rounds if self.mode == "json" else sum(1 for m in METRICS if m.llm)
        return calls * self.timeout


class JudgeSettings(ServiceSettings):
    """Attributes:
    max_k: largest accepted cut-off k.
    max_reference_chars: longest accepted reference answer (characters).
    weights: group weights of overall, keys A/B/C/D (JSON in the
        environment; default 0.40/0.35/0.25/0.00 from the MarxSphere design (docs/references.md) section 6).
    merge_policy: "max" (the reference's mergeScore) or "mean" of the rule and
        LLM scores.
    llm: JudgeLlmSettings (group, GRAPHMESH_JUDGE_LLM__<FIELD>).
    latency_budgets_ms: stage -> milliseconds at which the normalised latency
        is 1 (keys expand, retrieve, fuse, total, pg, graph).
    token_budget: tokens per answered question at which token efficiency is 1.
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_JUDGE_")

    port: int = DEFAULT_PORTS["judge"]
    max_k: int = 100
    max_reference_chars: int = 20000
    weights: dict[str, float] = Field(default_factory=lambda: {"A": 0.40, "B": 0.35, "C": 0.25, "D": 0.0})
    merge_policy: Literal["max", "mean"] = "max"
    llm: JudgeLlmSettings = Field(default_factory=JudgeLlmSettings)
    latency_budgets_ms: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_LATENCY_BUDGETS_MS))
    token_budget: int = Field(DEFAULT_TOKEN_BUDGET, ge=1)

    deprecated_fields: ClassVar[dict[str, str]] = llm_deprecated_fields(
        "rounds", "base_url", "api_key", "model", "timeout", "max_retries")
