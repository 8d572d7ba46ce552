"""RerankerService: thin gRPC layer over the cross-encoder."""
from __future__ import annotations

import asyncio

import grpc

from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from services.common.errors import InvalidArgument, abort_with, validate_query
from services.reranker.config import RerankerSettings
from services.reranker.core import CrossEncoderScorer


class RerankerServicer(reranker_pb2_grpc.RerankerServiceServicer):
    def __init__(self, settings: RerankerSettings) -> None:
        self._settings = settings
        self._scorer = (
            CrossEncoderScorer(settings.model_dir, settings.device, settings.batch_size, settings.max_length)
            if settings.model_dir
            else None
        )

    async def Rerank(self, request: reranker_pb2.RerankRequest, context: grpc.aio.ServicerContext) -> reranker_pb2.RerankResponse:
        query = validate_query(request.query, self._settings.max_query_chars)
        if len(request.passages) > self._settings.max_passages:
            raise InvalidArgument("passages", f"at most {self._settings.max_passages} passages per request")
        if self._scorer is None:
            await abort_with(context, grpc.StatusCode.FAILED_PRECONDITION, "NO_MODEL",
                             "no cross-encoder configured (GRAPHMESH_RERANKER_MODEL_DIR)")
        scores = await asyncio.to_thread(self._scorer.score, query, [p.text for p in request.passages])
        ranked = sorted(zip(request.passages, scores), key=lambda ps: -ps[1])
        return reranker_pb2.RerankResponse(
            scores=[reranker_pb2.PassageScore(id=p.id, score=s) for p, s in ranked],
            model=self._scorer.model_dir,
            device=self._scorer.device,
        )
