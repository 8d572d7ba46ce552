"""Reranker settings (environment prefix GRAPHMESH_RERANKER_)."""
from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings


class RerankerSettings(ServiceSettings):
    """Attributes:
    model_dir: local directory of a sentence-transformers CrossEncoder (or a
        Hugging Face BERT from which one is built); "" = no model, Rerank
        answers FAILED_PRECONDITION.
    device: "cpu", "cuda", "cuda:N" or "auto" (CUDA when available).
    batch_size: pairs per forward pass.
    max_passages: most passages per request.
    max_length: tokens per (query, passage) pair.
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_RERANKER_", extra="ignore")

    port: int = DEFAULT_PORTS["reranker"]
    model_dir: str = ""
    device: str = "auto"
    batch_size: int = 32
    max_passages: int = 200
    max_length: int = 512
