"""The gateway's settings groups (GRAPHMESH_GATEWAY_<GROUP>__<FIELD>), each
a typed model used by GatewaySettings (services.gateway.config)."""
from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from services.common.settings import REST_DEFAULT_PORT, LlmSettings
from services.gateway.answer import abstention

class GatewayLlmSettings(LlmSettings):
    """Group ``llm`` (GRAPHMESH_GATEWAY_LLM__*): the answering endpoint
    (services.common.settings.LlmSettings; empty base URL = extractive
    answers), plus:

    Attributes:
        max_tokens: answer length cap (tokens).
        citation_grammar: send llama.cpp's ``grammar`` field with each
            answer request, a GBNF grammar under which every sentence ends
            with a citation mark of a packed source
            (services.gateway.answer.citation_grammar). Only for llama.cpp
            servers: other OpenAI-compatible endpoints reject or ignore the
            field. ``graphmesh up --llm`` turns it on for its local server.
        max_sources: packed sources the LLM is shown, the first ones in
            citation order (0: every packed source). Fewer sources make a
            shorter prompt, so a local model on CPU answers sooner; the
            citation verifier still checks against every packed source.
        worked_example: show the domain pack's worked example
            (AnswerPrompt.example_zh/en) as an earlier turn. Off by
            default: unmeasured, and with it qwen0.5b answered without
            any mark in tests/e2e/test_answer_llm.py.
    """

    max_tokens: int = Field(512, ge=1)
    citation_grammar: bool = False
    worked_example: bool = False
    max_sources: int = Field(0, ge=0)


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


class ParentContextSettings(BaseModel):
    """Group ``parent_context`` (GRAPHMESH_GATEWAY_PARENT_CONTEXT__*).

    Attributes:
        enabled: pack each top chunk with its parent section
            (Candidate.context_text: the chunks of its section around it);
            a Search request switches it with "parent_context" in
            enabled_stages / disabled_stages. Off by default: measured on
            the documents dev set, docs/retrieval.md "Parent context".
        tokens: most tokens of the parent context, centred on the hit (a
            CJK character or a Latin word is one).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    tokens: int = Field(512, ge=1, le=4096)


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
        embed_batch: texts per Embed call during ingestion and in the sentence MaxSim
            stage (at most the expander's max_batch, 512 by default).
        sentence_vectors: after storing, embed each chunk's sentences (the
            units of the ``sentence.maxsim`` channel,
            services/gateway/search/sentence_maxsim.py) passage-side, so
            the expander's embedding cache holds them before the first
            question; about 0.8x more embedding work at ingest for a
            question that no longer embeds 50-60 sentences (docs/benchmarks.md
            "Sentence vectors at ingest"). Off: they are embedded, and then
            cached, by the first question that ranks the chunk.
        sentence_vectors_mode: when they are embedded: "background" (the
            default) queues them for a worker of the gateway that embeds
            them once no ingest has run for ``sentence_vectors_idle_seconds``,
            and only while no search runs, 32 at a time, so an Ingest call
            returns, and a corpus is searchable, after the chunks'
            embedding alone
            (services/gateway/library/sentence_backfill.py); "inline" embeds
            them before the Ingest call returns (stage sentence_vectors).
        sentence_vectors_idle_seconds: seconds without an ingest before the
            background worker embeds.
        max_file_bytes: largest file of an Ingest call (bytes); a larger file
            fails on its own with the reason, the others are stored.
    """

    model_config = ConfigDict(extra="forbid")

    chunk_tokens: int = 512
    chunk_overlap: int = 64
    embed_batch: int = Field(256, ge=1)
    sentence_vectors: bool = True
    sentence_vectors_mode: Literal["background", "inline"] = "background"
    sentence_vectors_idle_seconds: float = Field(2.0, ge=0.0)
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1024)


class OperationsSettings(BaseModel):
    """Group ``operations`` (GRAPHMESH_GATEWAY_OPERATIONS__*): ImportDocuments
    long-running operations (services/gateway/operations/).

    Attributes:
        dsn: PostgreSQL DSN of the operations table (``gateway_operations``,
            created at start); "" = GRAPHMESH_RETRIEVER_PG_DSN when that is
            set (``graphmesh up`` sets it), else operations are kept in
            memory and lost when the gateway stops.
        batch_records: JSONL documents stored per batch; progress is
            updated and a cancel honoured between batches.
        batch_files: files parsed and stored per batch.
        batch_timeout: seconds one batch may take (its deadline).
        lease: seconds after its last heartbeat (one every lease / 3
            while it runs) that an operation still not done is taken for
            one whose gateway died, and ended ABORTED.
        keep_done: most finished operations kept; older ones are deleted
            when a new one starts (0 = keep all).
    """

    model_config = ConfigDict(extra="forbid")

    dsn: str = ""
    batch_records: int = Field(200, ge=1)
    batch_files: int = Field(8, ge=1)
    batch_timeout: float = Field(3600.0, gt=0.0)
    lease: float = Field(60.0, gt=0.0)
    keep_done: int = Field(1000, ge=0)

    def resolved_dsn(self) -> str:
        """``dsn``, else GRAPHMESH_RETRIEVER_PG_DSN, else "" (in memory)."""
        return self.dsn or os.environ.get("GRAPHMESH_RETRIEVER_PG_DSN", "")


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
