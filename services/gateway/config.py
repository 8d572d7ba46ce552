"""Gateway settings (environment prefix GRAPHMESH_GATEWAY_)."""
from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, REST_DEFAULT_PORT, ServiceSettings


class GatewaySettings(ServiceSettings):
    """Attributes (times in seconds, sizes in characters):
    rest_port: REST/JSON transcoding port; -1 disables it.
    default_deadline: deadline of a request whose caller set none.
    expand_timeout / retrieve_timeout / rerank_timeout / fuse_timeout:
        caps per stage; the caller's remaining deadline applies when smaller.
    retrieve_top_k: candidates asked of each retriever channel (reference
        default 20 for vector chunks).
    rerank_enabled: run the cross-encoder by default (off: no trained
        cross-encoder ships offline).
    rerank_max_passages: most candidates sent to the reranker.
    fusion_method: "rrf" or "weighted".
    channel_weights: weight per channel for fusion (JSON in the environment).
    budget_chars: context budget (6,000, MarxSphere fuseResults).
    graph_enabled: fan out to retriever_graph.
    llm_base_url / llm_api_key / llm_model: an OpenAI-compatible endpoint;
        empty base URL = extractive answers.
    llm_timeout: seconds per LLM call. llm_max_tokens: answer length cap.
    chunk_chars / chunk_overlap: chunking of ingested documents.
    embed_batch: texts per Embed call during ingestion.
    entity_retrievers: retrievers asked for entities (SearchEntities) and
        given entities/triples at ingestion (JSON list).
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_GATEWAY_", extra="ignore")

    port: int = DEFAULT_PORTS["gateway"]
    rest_port: int = REST_DEFAULT_PORT
    default_deadline: float = 30.0
    expand_timeout: float = 10.0
    retrieve_timeout: float = 5.0
    rerank_timeout: float = 10.0
    fuse_timeout: float = 2.0
    retrieve_top_k: int = 20
    rerank_enabled: bool = False
    rerank_max_passages: int = 50
    fusion_method: str = "rrf"
    channel_weights: dict[str, float] = Field(
        default_factory=lambda: {"pg.vector": 1.0, "pg.keyword": 1.0, "graph.heading": 0.5, "graph.fulltext": 0.5, "graph.neighbour": 0.2, "rerank": 1.0}
    )
    budget_chars: int = 6000
    graph_enabled: bool = True
    llm_base_url: str = ""
    llm_api_key: str = "none"
    llm_model: str = ""
    llm_timeout: float = 60.0
    llm_max_tokens: int = 512
    chunk_chars: int = 512
    chunk_overlap: int = 64
    embed_batch: int = 256
    entity_retrievers: list[str] = Field(default_factory=lambda: ["retriever_graph"])
