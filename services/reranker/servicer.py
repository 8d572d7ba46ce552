"""RerankerService: validates, fits the pairs to the scorer's window, queues
them for dynamic batching, and answers best first."""
from __future__ import annotations

import grpc

from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from services.common.errors import InvalidArgument, abort_with, validate_query
from services.reranker import metrics
from services.reranker.batching import DynamicBatcher, QueueFull
from services.reranker.config import RerankerSettings
from services.reranker.scorer import Scorer, ScorerUnavailable


class RerankerServicer(reranker_pb2_grpc.RerankerServiceServicer):
    """Args:
        settings: reranker settings.
        scorer: the scorer, or None when none is configured (Rerank then
            answers FAILED_PRECONDITION).
        batcher: the dynamic batcher over ``scorer.score`` (None with no scorer).
    """

    def __init__(self, settings: RerankerSettings, scorer: Scorer | None, batcher: DynamicBatcher | None) -> None:
        self._settings = settings
        self._scorer = scorer
        self._batcher = batcher

    async def Rerank(self, request: reranker_pb2.RerankRequest, context: grpc.aio.ServicerContext) -> reranker_pb2.RerankResponse:
        query = validate_query(request.query, self._settings.max_query_chars)
        if len(request.passages) > self._settings.max_passages:
            raise InvalidArgument("passages", f"at most {self._settings.max_passages} passages per request, got {len(request.passages)}")
        if len(request.candidates) > self._settings.max_passages:
            raise InvalidArgument("candidates", f"at most {self._settings.max_passages} candidates per request, got {len(request.candidates)}")
        for i, p in enumerate(request.passages):
            if "\x00" in p.text:
                raise InvalidArgument(f"passages[{i}].text", "must not contain NUL characters")
        if self._scorer is None or self._batcher is None:
            await abort_with(context, grpc.StatusCode.FAILED_PRECONDITION, "NO_MODEL",
                             "no scorer configured (GRAPHMESH_RERANKER_SCORER with GRAPHMESH_RERANKER_MODEL_DIR "
                             "or GRAPHMESH_RERANKER_LLM__BASE_URL)")
        scorer = self._scorer
        if getattr(scorer, "listwise", False):
            return await self._rerank_list(request, context)
        passages = list(request.passages) or [
            reranker_pb2.Passage(id=c.id, text=f"{' '.join(c.heading_path)}\n{c.text}") for c in request.candidates]
        if not passages:
            return reranker_pb2.RerankResponse(model=scorer.model, device=scorer.device, scorer=scorer.name)
        metrics.INFLIGHT.inc()
        try:
            try:
                prepared = await scorer.prepare(query, [p.text for p in passages])
                metrics.TRUNCATED.inc(prepared.truncated)
                scores = await self._batcher.submit(prepared.query, prepared.passages, prepared.tokens)
            except QueueFull as err:
                await abort_with(context, grpc.StatusCode.RESOURCE_EXHAUSTED, "QUEUE_FULL", f"reranker queue is full: {err}; retry later")
            except ScorerUnavailable as err:
                code = grpc.StatusCode.FAILED_PRECONDITION if err.reason == "no_model" else grpc.StatusCode.UNAVAILABLE
                await abort_with(context, code, err.reason.upper(), str(err))
        finally:
            metrics.INFLIGHT.dec()
        ranked = sorted(zip(passages, scores), key=lambda ps: -ps[1])
        return reranker_pb2.RerankResponse(
            scores=[reranker_pb2.PassageScore(id=p.id, score=s) for p, s in ranked],
            model=scorer.model,
            device=scorer.device,
            scorer=scorer.name,
            truncated_passages=prepared.truncated,
        )

    async def _rerank_list(self, request: reranker_pb2.RerankRequest,
                           context: grpc.aio.ServicerContext) -> reranker_pb2.RerankResponse:
        """A list-wise scorer (ltr): the candidates scored at once, in the
        request's thread (about a millisecond per 100), not batched."""
        scorer = self._scorer
        if not request.candidates:
            raise InvalidArgument("candidates", f"the {scorer.name} scorer needs the fused candidate list")
        try:
            scores = scorer.score_list(request.candidates, list(request.keywords))
        except ScorerUnavailable as err:
            await abort_with(context, grpc.StatusCode.FAILED_PRECONDITION, err.reason.upper(), str(err))
        ranked = sorted(zip(request.candidates, scores), key=lambda cs: -cs[1])
        return reranker_pb2.RerankResponse(
            scores=[reranker_pb2.PassageScore(id=c.id, score=s) for c, s in ranked],
            model=scorer.model, device=scorer.device, scorer=scorer.name)
