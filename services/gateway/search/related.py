"""The second, seeded retrieval call of a search: the first-stage candidates
are fused once (top ``related_seeds``, no context), and every related
retriever is asked (RetrieverService.Related) for candidates related to
those seeds (the graph retriever: citations, versions, PageRank). Each
answer becomes one more candidate list for the final fusion. Holds no
retrieval logic: the fuser ranks the seeds, the retrievers find the rest.
"""
from __future__ import annotations

import asyncio
from collections.abc import Sequence

from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.gateway.downstream.interfaces import Fuser, Retriever
from services.gateway.config import GatewaySettings, RetrievalProfile
from services.gateway.search.fuse_request import fuse_request
from services.gateway.downstream.guard import Deadline, Trace, guarded
from services.gateway.search.scope import DEFAULT_SCOPE, Scope

#: Context budget of the seed fusion: no context is packed from it.
_SEED_BUDGET_CHARS = 1


async def related_lists(settings: GatewaySettings, fuser: Fuser, retrievers: Sequence[Retriever], query: str,
                        keywords: list[str], profile: RetrievalProfile, lists: list[fuser_pb2.CandidateList],
                        off: frozenset[str], deadline: Deadline, trace: Trace,
                        scope: Scope = DEFAULT_SCOPE) -> list[fuser_pb2.CandidateList]:
    """Candidate lists of the related channels for ``lists``' best hits,
    within ``scope`` (collections and metadata filters, as the first stage).

    Nothing is called (stage "related" SKIPPED) when the profile asks for
    no seeds, "related" is switched off, every related channel is off, no
    related retriever is configured, or the first stage found nothing. A
    failing fuser or retriever leaves its part out (stage DEGRADED).
    """
    channels = [c for c in names.GRAPH_RELATED if c not in off]
    askable = [r for r in retrievers if r.name in settings.related_retrievers and not ("graph" in off and r.name == "retriever_graph")]
    reason = ("no seeds wanted" if profile.related_seeds <= 0 else "related off" if names.STAGE_RELATED in off
              else "no related channel on" if not channels else "no related retriever" if not askable
              else "no candidates" if not any(lst.candidates for lst in lists) else "")
    if reason:
        trace.skip(names.STAGE_RELATED, reason)
        return []
    seed_request = fuse_request(query, lists, profile, profile.related_seeds, _SEED_BUDGET_CHARS)
    fused = await guarded(trace, names.STAGE_RELATED, "fuser", lambda t: fuser.fuse(seed_request, t), None, deadline,
                          settings.deadlines.fuse)
    if fused is None or not fused.candidates:
        return []
    seeds = [retriever_pb2.Seed(document_id=c.document_id or c.id, chunk_id=c.id, score=c.fused_score)
             for c in fused.candidates[: profile.related_seeds]]
    request = retriever_pb2.RelatedRequest(
        query=query, keywords=keywords, seeds=seeds, top_k=profile.retrieve_top_k,
        disabled_channels=sorted(c for c in off if c in names.DOCUMENT_CHANNELS),
        collections=scope.collections, filters=scope.proto_filters())

    async def one(retriever: Retriever) -> fuser_pb2.CandidateList | None:
        reply = await guarded(trace, names.related_stage(retriever.name), retriever.name,
                              lambda t: retriever.related(request, t), None, deadline, settings.deadlines.retrieve)
        return None if reply is None else fuser_pb2.CandidateList(producer=retriever.name, candidates=reply.candidates)

    return [lst for lst in await asyncio.gather(*(one(r) for r in askable)) if lst is not None]
