"""Reranker settings (environment prefix GRAPHMESH_RERANKER_)."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, LlmSettings, ServiceSettings, llm_deprecated_fields

ScorerName = Literal["cross-encoder", "bi-encoder", "llm", "ltr"]
CrossEncoderRuntime = Literal["auto", "onnx", "torch"]


class RerankerLlmSettings(LlmSettings):
    """Group ``llm`` (GRAPHMESH_RERANKER_LLM__*): the endpoint of the llm
    scorer ("" = none: the llm scorer answers FAILED_PRECONDITION). It must
    return ``logprobs`` with ``top_logprobs`` (llama.cpp server, vLLM,
    OpenAI). One retry by default.

    Attributes:
        concurrency: LLM calls in flight at once.
        max_passage_chars: passage characters shown to the LLM (longer ones
            are cut to heading line plus head, and counted).
    """

    max_retries: int = Field(1, ge=0, le=10)
    concurrency: int = Field(2, ge=1)
    max_passage_chars: int = Field(1200, ge=32)


class RerankerSettings(ServiceSettings):
    """Attributes:
    scorer: which scorer answers Rerank:
        "cross-encoder" (a sentence-transformers CrossEncoder from
        ``model_dir``; needs the ``models`` extra),
        "bi-encoder" (cosine of the expander's query and passage embeddings,
        over the expander's Embed RPC at GRAPHMESH_EXPANDER_ADDR; cheap,
        always available), or
        "llm" (probability of "yes" from an OpenAI-compatible endpoint at
        ``llm.base_url``; for small candidate sets), or
        "ltr" (a LambdaMART model over a fused candidate list's channel
        scores, ``ltr_model_file``; needs RerankRequest.candidates).
    ltr_model_file: the ltr scorer's LightGBM text model; "" = the law_zh
        model shipped in models/ltr/law_zh.txt (models/ltr/README.md).
    model_dir: local directory of a CrossEncoder (e.g. written by
        ``graphmesh reranker train``); "" = none, and the cross-encoder scorer
        answers FAILED_PRECONDITION. Loaded once, lazily, local files only.
    runtime: what runs the cross-encoder: "onnx" (ONNX Runtime on CPU over
        ``model_dir``/onnx/model.onnx, written by ``graphmesh reranker
        export-onnx`` or at the end of training; no torch needed), "torch"
        (sentence-transformers; needs the ``models`` extra), or "auto":
        torch when ``device`` names CUDA or is "auto" and torch sees a GPU,
        else ONNX when the directory has an export, else torch.
    device: "auto" (CUDA when torch sees a GPU, else CPU), "cpu", "cuda", "cuda:N".
    fp16: run the cross-encoder in half precision on CUDA (ignored on CPU).
    warm_up: start loading the cross-encoder in the background when the
        service starts (health is SERVING at once; a call that arrives
        before the load ends waits for it), so the first Rerank does not
        pay the load inside the gateway's rerank timeout.
    max_length: tokens per (query, passage) pair for the cross-encoder. A
        passage that does not fit is cut to its heading line plus the head of
        its body and counted (graphmesh_reranker_truncated_total).
    max_query_share: at most this share of ``max_length`` goes to the query
        (a longer query is cut; the passage gets the rest).
    max_batch_tokens: token budget of one batch, counted padded (longest pair
        x pairs), as text-embeddings-inference counts for padded models;
        at least ``max_length``. Characters stand for tokens with the
        bi-encoder and llm scorers.
    max_batch_pairs: most pairs in one batch.
    forward_batch: pairs per forward pass inside a batch, length-sorted so
        each pass pads less (0 = auto: 16 on CPU, where padding costs, the
        whole batch on CUDA).
    max_wait_ms: how long the first pair of a batch waits for others to join
        it (milliseconds); a full batch goes at once. 0 = no waiting.
    queue_size: most pairs waiting to be scored; a request whose pairs would
        not fit gets RESOURCE_EXHAUSTED.
    max_passages: most passages per request (INVALID_ARGUMENT above it).
    expander_timeout: seconds per Embed call (bi-encoder).
    llm: RerankerLlmSettings (group, GRAPHMESH_RERANKER_LLM__<FIELD>).
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_RERANKER_")

    port: int = DEFAULT_PORTS["reranker"]
    scorer: ScorerName = "cross-encoder"
    model_dir: str = ""
    runtime: CrossEncoderRuntime = "auto"
    ltr_model_file: str = ""
    device: str = "auto"
    fp16: bool = True
    warm_up: bool = True
    max_length: int = Field(512, ge=16, le=8192)
    max_query_share: float = Field(0.5, gt=0.0, lt=1.0)
    max_batch_tokens: int = Field(16384, ge=16)
    max_batch_pairs: int = Field(64, ge=1)
    forward_batch: int = Field(0, ge=0)
    max_wait_ms: float = Field(5.0, ge=0.0)
    queue_size: int = Field(4096, ge=1)
    max_passages: int = Field(200, ge=1)
    expander_timeout: float = 10.0
    llm: RerankerLlmSettings = Field(default_factory=RerankerLlmSettings)

    deprecated_fields: ClassVar[dict[str, str]] = llm_deprecated_fields(
        "base_url", "api_key", "model", "timeout", "max_retries", "concurrency", "max_passage_chars")

    @model_validator(mode="after")
    def _budget_fits_one_pair(self) -> "RerankerSettings":
        if self.scorer == "cross-encoder" and self.max_batch_tokens < self.max_length:
            raise ValueError("max_batch_tokens must be at least max_length")
        if self.queue_size < self.max_passages:
            raise ValueError("queue_size must be at least max_passages")
        return self
