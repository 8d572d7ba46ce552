"""What the gateway sends the fuser and makes of its answer: the FuseRequest
of a retrieval profile, the arrival-order fallback when the fuser is down,
and the ``Retrieval`` a search produces (results, packed context, the
candidates each citation number points at)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graphmesh.common.v1 import types_pb2
from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.config import RetrievalProfile
from services.gateway.downstream.guard import Trace


@dataclass
class Retrieval:
    """Everything one search produced, for Answer to build on.

    Attributes:
        response: the SearchResponse (results without embeddings, context,
            timings, degraded, query info).
        cited_ids: candidate ids of the packed context, in citation order
            (citation [n] is ``cited_ids[n - 1]``).
        cited_texts: their texts as packed (the parent context when they
            have one), same order.
        by_id: every candidate seen, by id.
    """

    response: gateway_pb2.SearchResponse
    cited_ids: list[str]
    cited_texts: list[str]
    by_id: dict[str, types_pb2.Candidate]


def fuse_request(query: str, lists: Sequence[fuser_pb2.CandidateList], profile: RetrievalProfile, top_k: int,
                 budget_chars: int, rerank_scores: dict[str, float] | None = None,
                 mmr_lambda: float | None = None,
                 translation: types_pb2.QueryTranslation | None = None) -> fuser_pb2.FuseRequest:
    """The FuseRequest for ``lists`` under ``profile`` (fusion method and
    channel weights), ``top_k`` results and a context of ``budget_chars``
    characters; MMR over the fused list when ``mmr_lambda`` is set; the
    query's ``translation`` for the fuser's cross-script check."""
    request = fuser_pb2.FuseRequest(
        query=query, lists=lists, rerank_scores=rerank_scores or {},
        method=fuser_pb2.FUSION_METHOD_WEIGHTED if profile.fusion_method == "weighted" else fuser_pb2.FUSION_METHOD_RRF,
        channel_weights=profile.channel_weights, top_k=top_k, budget_chars=budget_chars, translation=translation,
    )
    if mmr_lambda is not None:
        request.mmr_lambda = mmr_lambda
    return request


def arrival_order(lists: Sequence[fuser_pb2.CandidateList], top_k: int) -> fuser_pb2.FuseResponse:
    """Without the fuser: the first ``top_k`` distinct candidates in the
    order the retrievers returned them, and no packed context."""
    seen: dict[str, types_pb2.Candidate] = {}
    for lst in lists:
        for cand in lst.candidates:
            seen.setdefault(cand.id, cand)
    return fuser_pb2.FuseResponse(candidates=list(seen.values())[:top_k])


def to_retrieval(fused: fuser_pb2.FuseResponse, lists: Sequence[fuser_pb2.CandidateList], trace: Trace,
                 info: gateway_pb2.QueryInfo) -> Retrieval:
    """The Retrieval of a fuser answer: results without their embeddings
    (each with the collection and metadata its retriever gave it, which the
    fuser does not carry), the packed context and the candidates its
    citation numbers point at."""
    by_id = {c.id: c for lst in lists for c in lst.candidates}
    results = []
    for cand in fused.candidates:
        cand.ClearField("embedding")
        original = by_id.get(cand.id)
        if original is not None:
            cand.collection = cand.collection or original.collection
            for key, value in original.metadata.items():
                cand.metadata.setdefault(key, value)
        results.append(cand)
    by_id.update({c.id: c for c in results})
    # a fuser older than PackedContext.cited_ids numbered its sections in order
    cited_ids = list(fused.context.cited_ids) or [cid for sec in fused.context.sections for cid in sec.candidate_ids]
    response = gateway_pb2.SearchResponse(results=results, context=fused.context.text, timings=trace.timings,
                                          degraded=trace.degraded, query_info=info, context_ids=cited_ids)
    return Retrieval(response, cited_ids, [by_id[c].context_text or by_id[c].text for c in cited_ids if c in by_id], by_id)
