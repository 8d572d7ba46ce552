"""FuserService: thin gRPC layer over ``core``."""
from __future__ import annotations

import grpc

from graphmesh.fuser.v1 import fuser_pb2, fuser_pb2_grpc
from services.fuser.convert import candidate_to_item, item_to_candidate
from services.common.cross_lingual import translation_from_message
from services.common.errors import InvalidArgument, validate_range
from services.fuser import core
from services.fuser.config import FuserSettings


class FuserServicer(fuser_pb2_grpc.FuserServiceServicer):
    def __init__(self, settings: FuserSettings) -> None:
        self._settings = settings

    async def Fuse(self, request: fuser_pb2.FuseRequest, context: grpc.aio.ServicerContext) -> fuser_pb2.FuseResponse:
        s = self._settings
        top_k = validate_range(request.top_k or 10, 1, s.max_top_k, "top_k")
        budget = validate_range(request.budget_chars or core.DEFAULT_BUDGET_CHARS, 1, s.max_budget_chars, "budget_chars")
        for source, share in request.quotas.items():
            if not 0.0 <= share <= 1.0:
                raise InvalidArgument(f"quotas[{source}]", "must be a fraction in [0, 1]")
        lists = [[candidate_to_item(c) for c in lst.candidates] for lst in request.lists]
        items = core.merge(lists)
        if request.rerank_scores:
            order = sorted(request.rerank_scores.items(), key=lambda kv: -kv[1])
            rerank_rank = {cid: i + 1 for i, (cid, _) in enumerate(order)}
            for it in items:
                if it.id in request.rerank_scores:
                    it.scores.append(core.Scored("rerank", request.rerank_scores[it.id], rerank_rank[it.id], "cross-encoder"))
        script, words = translation_from_message(request.translation)
        weights = core.centred_weights(items, core.other_script_weights(items, dict(request.channel_weights), script))
        if request.method == fuser_pb2.FUSION_METHOD_WEIGHTED:
            fused = core.weighted_scores(items, weights)
        else:
            fused = core.rrf_scores(items, weights, s.rrf_k)
        fused = core.codes_first(items, core.cross_script_first(items, fused, words, s.cross_script_cosine_gap), request.query)
        fused = core.price_first(items, fused, request.query)
        if request.HasField("mmr_lambda"):
            if not 0.0 <= request.mmr_lambda <= 1.0:
                raise InvalidArgument("mmr_lambda", "must be in [0, 1]")
            # MMR picks top_k from a wider fused pool.
            pool = core.rank(items, fused, top_k * s.mmr_pool_factor, request.one_per_document)
            ranked = core.mmr(pool, request.mmr_lambda, top_k)
        else:
            ranked = core.rank(items, fused, top_k, request.one_per_document)
        packed = core.pack_context(ranked, budget, dict(request.quotas) or None, s.pack_order)
        return fuser_pb2.FuseResponse(
            candidates=[item_to_candidate(it) for it in ranked],
            context=fuser_pb2.PackedContext(
                text=packed.text,
                sections=[
                    fuser_pb2.ContextSection(
                        source=sec.source, quota_chars=sec.quota_chars,
                        used_chars=sec.used_chars, truncated=sec.truncated, candidate_ids=sec.candidate_ids,
                    )
                    for sec in packed.sections
                ],
                cited_ids=packed.cited_ids,
            ),
        )
