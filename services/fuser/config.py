"""Fuser settings (environment prefix GRAPHMESH_FUSER_)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings


class FuserSettings(ServiceSettings):
    """Attributes:
    rrf_k: the k of reciprocal rank fusion (60).
    max_top_k: largest accepted top_k.
    max_budget_chars: largest accepted context budget (characters).
    mmr_pool_factor: MMR chooses top_k out of top_k x this many fused candidates.
    pack_order: how the packed context orders its candidates (core.PACK_ORDERS):
        "rank", the fused order across sources (each source within its
        quota), or "source", MarxSphere's source-by-source order.
    entity_rank: overrides of services.fuser.entity_rank.RankConfig fields
        (weights w_embed / w_plain, bonuses, gate thresholds; JSON in the
        environment); the Guizhou indicator GraphRAG design (docs/references.md) values when empty.
    cross_script_cosine_gap: how far (cosine) the other writing system's best
        passage may be below the best in the question's own for it to go first
        (core.cross_script_first); negative (the default): never by cosine,
        its gain not told from noise. core.CROSS_SCRIPT_COSINE_GAP is
        e5-small's value; another embedder has its own gap between languages.
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_FUSER_")

    port: int = DEFAULT_PORTS["fuser"]
    rrf_k: int = 60
    max_top_k: int = 200
    max_budget_chars: int = 100_000
    mmr_pool_factor: int = 3
    pack_order: Literal["rank", "source"] = "rank"
    entity_rank: dict[str, Any] = {}
    cross_script_cosine_gap: float = -1.0
