"""Builds the reranker service: the configured scorer, its dynamic batcher,
and the servicer."""
from __future__ import annotations

import asyncio
import logging

from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from services.common.server import Service
from services.common.settings import MeshAddresses
from services.reranker.batching import DynamicBatcher
from services.reranker.config import RerankerSettings
from services.reranker.scorer import Scorer
from services.reranker.servicer import RerankerServicer


log = logging.getLogger("graphmesh.reranker")


def _load_quietly(load) -> None:
    """Warm-up load; a failure is logged here and reported again by the first Rerank."""
    try:
        load()
    except Exception as err:  # noqa: BLE001 - the first call reports it as FAILED_PRECONDITION
        log.warning("scorer warm-up failed: %s", err)


def _torch_sees_a_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def cross_encoder_runtime(settings: RerankerSettings) -> str:
    """"onnx" or "torch": ``settings.runtime``, with "auto" resolved (torch
    for a GPU, ONNX Runtime where the model directory has an export, torch
    otherwise)."""
    if settings.runtime != "auto":
        return settings.runtime
    from services.reranker.onnx_cross_encoder import exported_model

    wants_gpu = settings.device.startswith("cuda") or (settings.device == "auto" and _torch_sees_a_gpu())
    return "onnx" if not wants_gpu and exported_model(settings.model_dir) is not None else "torch"


def build_scorer(settings: RerankerSettings, addresses: MeshAddresses | None = None) -> Scorer | None:
    """The scorer ``settings.scorer`` names, or None when it has nothing to
    run (cross-encoder without model_dir; llm without llm_base_url).

    Raises:
        FileNotFoundError: model_dir is set but is not a directory, or holds
            no ONNX export under runtime "onnx".
    """
    if settings.scorer == "cross-encoder":
        if not settings.model_dir:
            return None
        if cross_encoder_runtime(settings) == "onnx":
            from services.reranker.onnx_cross_encoder import OnnxCrossEncoderScorer

            return OnnxCrossEncoderScorer(settings.model_dir, settings.max_length, settings.max_query_share,
                                          settings.forward_batch)
        from services.reranker.cross_encoder import CrossEncoderScorer

        return CrossEncoderScorer(settings.model_dir, settings.device, settings.max_length,
                                  settings.max_query_share, settings.fp16, settings.forward_batch)
    if settings.scorer == "ltr":
        from services.reranker.ltr import DEFAULT_MODEL_FILE, LtrScorer

        return LtrScorer(settings.ltr_model_file or DEFAULT_MODEL_FILE)
    if settings.scorer == "bi-encoder":
        from services.reranker.bi_encoder import BiEncoderScorer

        return BiEncoderScorer((addresses or MeshAddresses()).expander_addr, settings.expander_timeout)
    if not settings.llm.base_url:
        return None
    from services.common.llm import LlmClient
    from services.reranker.llm_scorer import LlmScorer

    client = LlmClient(settings.llm.config())
    return LlmScorer(client, settings.llm.concurrency, settings.llm.max_passage_chars, settings.max_query_chars)


async def build(settings: RerankerSettings | None = None, addresses: MeshAddresses | None = None,
                scorer: Scorer | None = None) -> tuple[Service, RerankerSettings]:
    """Returns the reranker Service and its settings.

    Args:
        settings: default RerankerSettings() from the environment.
        addresses: where the expander is (bi-encoder); default from the environment.
        scorer: a ready scorer instead of the one ``settings`` names (tests, benchmarks).
    """
    settings = settings or RerankerSettings()
    scorer = scorer if scorer is not None else build_scorer(settings, addresses)
    batcher = None
    if scorer is not None:
        batcher = DynamicBatcher(scorer.score, settings.max_batch_tokens, settings.max_batch_pairs,
                                 settings.max_wait_ms / 1000.0, settings.queue_size, padded=scorer.padded)
    servicer = RerankerServicer(settings, scorer, batcher)
    loading: list[asyncio.Future] = []

    async def on_start() -> None:
        load = getattr(scorer, "load", None)
        if settings.warm_up and callable(load):
            loading.append(asyncio.get_running_loop().run_in_executor(None, _load_quietly, load))

    async def on_stop() -> None:
        if batcher is not None:
            await batcher.stop()
        if scorer is not None:
            await scorer.close()

    service = Service(
        name="reranker",
        full_names=[reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name],
        register=lambda server: reranker_pb2_grpc.add_RerankerServiceServicer_to_server(servicer, server),
        on_start=on_start,
        on_stop=on_stop,
    )
    return service, settings
