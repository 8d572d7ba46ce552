"""The optional cross-encoder stage of Search: the fused best candidates
scored by the reranker service, whose scores the final fusion blends in
(the profile's rerank weight). Used by Search (``rerank_scores``) and by
entity search (``rerank_detail``)."""
from __future__ import annotations

import time

from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.reranker.v1 import reranker_pb2
from services.common import names
from services.gateway.config import GatewaySettings, RetrievalProfile
from services.gateway.downstream.guard import Deadline, Trace, guarded
from services.gateway.downstream.interfaces import Fuser, Reranker
from services.gateway.search.fuse_request import arrival_order, fuse_request


async def rerank_scores(settings: GatewaySettings, fuser: Fuser, reranker: Reranker, query: str,
                        lists: list[fuser_pb2.CandidateList], profile: RetrievalProfile, enabled: bool,
                        deadline: Deadline, trace: Trace, keywords: list[str] | None = None) -> dict[str, float]:
    """Reranker scores {candidate id: score} of the fused top
    ``rerank.max_passages`` (heading path + text, and the candidates
    themselves with their channel scores and the query's ``keywords``, which
    the list-wise "ltr" scorer reads): a first fusion without rerank scores
    picks them (the best candidates, not the first to arrive). {} when
    ``enabled`` is false (stage SKIPPED), when there is no candidate, or when
    the reranker fails (stage DEGRADED); the stage detail names the scorer
    and how many passages it cut. Raises nothing."""
    if not enabled:
        trace.skip(names.STAGE_RERANK, "rerank off")
        return {}
    n = settings.rerank.max_passages
    request = fuse_request(query, lists, profile, n, settings.budget_chars)
    first = await guarded(trace, names.STAGE_RERANK_CANDIDATES, "fuser", lambda t: fuser.fuse(request, t),
                          arrival_order(lists, n), deadline, settings.deadlines.fuse)
    candidates = list(first.candidates[:n])
    if not candidates:
        trace.skip(names.STAGE_RERANK, "no candidates")
        return {}
    passages = [reranker_pb2.Passage(id=c.id, text=f"{' '.join(c.heading_path)}\n{c.text}") for c in candidates]
    for c in candidates:
        c.ClearField("embedding")
    rerank = reranker_pb2.RerankRequest(query=query, passages=passages, keywords=keywords or [], candidates=candidates)
    started = time.perf_counter()
    reply = await guarded(trace, names.STAGE_RERANK, "reranker", lambda t: reranker.rerank(rerank, t), None,
                          deadline, settings.deadlines.rerank, record_ok=False)
    if reply is None:
        return {}
    trace.record(names.STAGE_RERANK, started, detail=rerank_detail(reply))
    return {p.id: p.score for p in reply.scores}


def rerank_detail(reply: reranker_pb2.RerankResponse) -> str:
    """What the reranker did, for the stage detail: "<scorer>: N scored, M cut"."""
    return f"{reply.scorer or 'reranker'}: {len(reply.scores)} scored, {reply.truncated_passages} cut"
