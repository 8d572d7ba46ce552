"""Search: expand -> retrieve (every retriever in parallel, each under the
caller's remaining deadline; the query embedding asked beside the analysis,
so the channels that need no vector start first: split_retrieval) -> related (seeded graph channels) -> sentence
MaxSim -> optional cross-encoder rerank -> fuse and pack. The fast path (PostgreSQL only, no graph, no rerank) shares the same
steps. Holds no retrieval logic: that lives in the services it calls.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from functools import partial

from graphmesh.common.v1 import types_pb2
from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.common.filters import DEFAULT_COLLECTION
from services.gateway.search.collection_packs import CollectionPacks
from services.gateway.search.fan_out import PG, retrieve_all
from services.gateway.downstream.interfaces import Expander, Fuser, Reranker, Retriever
from services.gateway.config import GatewaySettings, RetrievalProfile
from services.gateway.search.fuse_request import Retrieval, arrival_order, fuse_request, to_retrieval
from services.gateway.downstream.guard import Deadline, Trace, guarded
from services.gateway.search.query_adapter import adapted_embedding, configured_adapter
from services.gateway.search.related import related_lists
from services.gateway.search.rerank_stage import rerank_scores
from services.gateway.search.scope import DEFAULT_SCOPE, Scope, no_match_note
from services.gateway.search.sentence_maxsim import maxsim_list
from services.gateway.search.sentence_vectors import SentenceVectorCache
from services.gateway.search.understanding import (Understanding, add_expansions, apply_embedding, embed_query,
                                                   hyde_embedding, understand)

GRAPH = "retriever_graph"


class SearchFlow:
    """Runs Search for the gateway's use cases.

    Args:
        settings: the gateway's settings (stage caps, profiles, budget).
        expander / reranker / fuser: their clients.
        retrievers: every retriever's client; the one named "retriever_pg"
            also serves expansions and the fast path.
        packs: the collections' domain packs (default: asked of ``retrievers``);
            the expander classifies a question with the packs searched.
    """

    def __init__(self, settings: GatewaySettings, expander: Expander, retrievers: Sequence[Retriever],
                 reranker: Reranker, fuser: Fuser, packs: CollectionPacks | None = None) -> None:
        self.settings = settings
        self.expander = expander
        self.retrievers = list(retrievers)
        self.reranker = reranker
        self.fuser = fuser
        self.packs = packs or CollectionPacks(self.retrievers)
        self.sentence_vectors = SentenceVectorCache(settings.sentence_cache_mb * 1024 * 1024)
        self.query_adapter = configured_adapter(settings.query_adapter_file)
        self._in_flight = 0  # searches running in this gateway (SearchFlow.search)

    @property
    def in_flight(self) -> int:
        """Searches running now in this gateway."""
        return self._in_flight

    def _retriever(self, name: str) -> Retriever | None:
        return next((r for r in self.retrievers if r.name == name), None)

    async def search(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline,
                     disabled: frozenset[str] = frozenset(), scope: Scope = DEFAULT_SCOPE,
                     enabled: frozenset[str] = frozenset()) -> Retrieval:
        """The full pipeline for ``query``; ``disabled`` switches stages or
        channels off and ``enabled`` on where the profile has them off
        (names.SWITCHABLE_STAGES), ``rerank`` None = the service default;
        every retriever searches only ``scope``, the related call included.
        After the first-stage retrieval, the profile's related channels run
        seeded by a first fusion (services.gateway.search.related).

        Raises:
            DownstreamError: the query is invalid (INVALID_ARGUMENT from a
                service), or no retriever answered (DEADLINE_EXCEEDED when
                every one timed out, else UNAVAILABLE).
        """
        self._in_flight += 1
        overlap = self._overlap()
        try:
            return await self._search(query, top_k, rerank, deadline, disabled, scope, enabled, overlap)
        finally:
            self._in_flight -= 1

    def _overlap(self) -> bool:
        """Whether this search asks its embedding beside its analysis: on by
        setting and with at most ``overlap_max_in_flight`` searches running.
        Under more load the cores are busy anyway and the split's extra
        Expand and Retrieve calls cost throughput (docs/benchmarks.md)."""
        s = self.settings
        return s.overlap_query_embedding and self._in_flight <= s.overlap_max_in_flight

    async def _search(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline,
                      disabled: frozenset[str], scope: Scope, enabled: frozenset[str], overlap: bool) -> Retrieval:
        trace = Trace()
        started = time.perf_counter()
        packs = await self.packs.for_search(scope.collections, deadline)
        missing = await self.packs.not_stored(scope.collections, deadline)
        if missing:  # an empty answer should say why, not look like a miss
            guesses = [(f"the only collection stored is {close!r}" if m == DEFAULT_COLLECTION else f"{m!r} looks like {close!r}")
                       for m in missing if (close := self.packs.closest_stored(m))]
            stored = sorted(self.packs.known - {DEFAULT_COLLECTION})
            if DEFAULT_COLLECTION in missing and len(stored) > 1:  # a trial's CLI asked the default beside hr and hr2
                guesses.append("the collections stored are " + ", ".join(map(repr, stored[:8]))
                               + (f" and {len(stored) - 8} more" if len(stored) > 8 else "") + " (--collection NAME)")
            trace.skip(names.STAGE_COLLECTIONS, f"no store holds collection {', '.join(map(repr, missing))}: nothing was "
                                          "ingested into it (graphmesh collections list names those that exist)"
                                          + (f"; {', '.join(guesses)}" if guesses else ""))
        # The embedding is asked beside the analysis, so the keyword channels
        # need not wait for the model (split_retrieval).
        embedding = (asyncio.create_task(embed_query(self.expander, query, deadline, trace,
                                                     self.settings.deadlines.expand, packs)) if overlap else None)
        try:
            retrieval = await self._search_with(query, top_k, rerank, deadline, disabled, scope, enabled, packs,
                                                trace, embedding)
        finally:
            if embedding is not None:
                # The search may have failed before it needed the vector. A
                # cancelled embedding can still end in its own failure (its
                # call finished as the cancel arrived), so the outcome is read
                # whenever it comes, and never logged as lost.
                embedding.cancel()
                embedding.add_done_callback(_read_outcome)
        if scope.filters and not retrieval.response.results and not missing:
            retrieval.response.timings.add(stage=names.STAGE_FILTERS, status=types_pb2.STAGE_STATUS_SKIPPED,
                                           detail=no_match_note(scope))
        retrieval.response.timings.append(trace.record(names.STAGE_TOTAL, started))
        return retrieval

    async def _search_with(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline,
                           disabled: frozenset[str], scope: Scope, enabled: frozenset[str], packs: list[str],
                           trace: Trace, embedding: asyncio.Task | None) -> Retrieval:
        """``search``'s stages after the domain packs are known; ``embedding``
        is the pending ``embed_query`` task, or None to embed in ``understand``."""
        s = self.settings
        understood = await understand(self.expander, query, deadline, trace, s.deadlines.expand, packs,
                                      embed=embedding is None)
        profile_name, profile = s.profile_for(understood.question_type, understood.confidence)
        understood.info.profile = profile_name
        understood.info.domain_packs.extend(packs)
        parent = self._parent_tokens(disabled, enabled)
        disabled = profile.switched_off(disabled, enabled)
        pg = self._retriever(PG)
        if profile.expansions and names.STAGE_EXPANSION not in disabled and understood.keywords and pg is not None:
            await add_expansions(pg, understood, profile.max_expansions, deadline, trace, s.deadlines.retrieve,
                                 list(scope.collections))
        hyde = []
        if profile.hyde and names.PG_HYDE not in disabled:
            hyde = await hyde_embedding(self.expander, query, deadline, trace, s.deadlines.expand, packs)
        if embedding is not None and embedding.done():
            apply_embedding(understood, embedding.result())
            embedding = None
        adapt = partial(adapted_embedding, packs=packs, disabled=disabled, override=self.query_adapter)
        request = self._retrieve_request(query, understood, profile, hyde, disabled, scope, parent, top_k,
                                         adapt(understood))
        graph_off = "graph" in disabled or all(c in disabled for c in names.GRAPH_FIRST_STAGE)
        retrievers = [r for r in self.retrievers if not (graph_off and r.name == GRAPH)]
        if all(r.name != GRAPH for r in retrievers):
            trace.skip(names.retrieve_stage(GRAPH), "graph disabled" if "graph" in disabled else "no graph channel on")
        lists = await retrieve_all(retrievers, request, deadline, trace, s.deadlines.retrieve, embedding=embedding,
                                   understood=understood, adapt=adapt)
        lists += await related_lists(s, self.fuser, self.retrievers, request.query, understood.keywords, profile, lists,
                                     disabled, deadline, trace, scope)
        lists += await maxsim_list(s, self.fuser, self.expander, request.query, understood.embedding, profile, lists,
                                   disabled, deadline, trace, self.sentence_vectors, understood.info.embedding_model,
                                   understood.script_centroids)
        use_rerank = s.rerank.enabled if rerank is None else rerank
        scores = await rerank_scores(s, self.fuser, self.reranker, query, lists, profile,
                                     use_rerank and names.STAGE_RERANK not in disabled, deadline, trace,
                                     list(understood.keywords))
        mmr_lambda = profile.mmr_lambda if "mmr" not in disabled else None
        return await self.fuse(query, lists, top_k, deadline, trace, understood.info, profile, scores, mmr_lambda,
                               understood.translation)

    async def fast_search(self, query: str, top_k: int, deadline: Deadline, scope: Scope = DEFAULT_SCOPE) -> Retrieval:
        """The fast path: PostgreSQL channels only, no graph, no rerank, the
        default profile's fusion.

        Raises:
            DownstreamError: retriever_pg failed, or the query is invalid.
        """
        s = self.settings
        trace = Trace()
        packs = await self.packs.for_search(scope.collections, deadline)
        understood = await understand(self.expander, query, deadline, trace, s.deadlines.expand, packs)
        understood.info.domain_packs.extend(packs)
        _, profile = s.profile_for("", 0.0)
        request = self._retrieve_request(query, understood, profile, [], frozenset(), scope, self._parent_tokens(), top_k)
        pg = self._retriever(PG)
        lists = await retrieve_all([pg] if pg else [], request, deadline, trace, s.deadlines.retrieve, required=True)
        trace.skip(names.retrieve_stage(GRAPH), "fast path")
        trace.skip(names.STAGE_RERANK, "fast path")
        return await self.fuse(query, lists, top_k, deadline, trace, understood.info, profile,
                               translation=understood.translation)

    async def fuse(self, query: str, lists: list[fuser_pb2.CandidateList], top_k: int, deadline: Deadline, trace: Trace,
                   info, profile: RetrievalProfile | None = None, rerank_scores: dict[str, float] | None = None,
                   mmr_lambda: float | None = None, translation: types_pb2.QueryTranslation | None = None) -> Retrieval:
        """Merges, fuses (``profile``, default: the default profile) and packs
        ``lists`` through the fuser, with the query's ``translation`` for its
        cross-script check; without the fuser, candidates in arrival order
        and no packed context (stage "fuse" DEGRADED)."""
        profile = profile or self.settings.profile_for("", 0.0)[1]
        request = fuse_request(query, lists, profile, top_k, self.settings.budget_chars, rerank_scores, mmr_lambda,
                               translation)
        fused = await guarded(trace, names.STAGE_FUSE, "fuser", lambda t: self.fuser.fuse(request, t),
                              arrival_order(lists, top_k), deadline, self.settings.deadlines.fuse)
        return to_retrieval(fused, lists, trace, info)

    def _parent_tokens(self, disabled: frozenset[str] = frozenset(), enabled: frozenset[str] = frozenset()) -> int:
        """The parent-context budget (tokens) to ask the retrievers for: the
        setting's, when parent context is on by setting or switched on by
        the request and not switched off by it; else 0."""
        s = self.settings
        on = (s.parent_context.enabled or names.STAGE_PARENT_CONTEXT in enabled) and names.STAGE_PARENT_CONTEXT not in disabled
        return s.parent_context.tokens if on else 0

    def _retrieve_request(self, query: str, understood: Understanding, profile: RetrievalProfile,
                          hyde: list[float], disabled: frozenset[str], scope: Scope,
                          parent_tokens: int = 0, top_k: int = 0, adapted: list[float] | None = None,
                          ) -> retriever_pb2.RetrieveRequest:
        """The RetrieveRequest of one search: each channel asked for the profile's
        ``retrieve_top_k`` candidates, or for ``top_k`` when the caller wants more
        results than that (so that a Search of top_k 100 can return 100);
        ``adapted``: the query adapter's vector for pg.adapted, when known."""
        return retriever_pb2.RetrieveRequest(
            query=understood.info.normalized_query or query, keywords=understood.keywords,
            query_embedding=understood.embedding, hyde_embedding=hyde, adapted_embedding=adapted or [],
            top_k=max(profile.retrieve_top_k, top_k),
            disabled_channels=sorted(d for d in disabled if d in names.DOCUMENT_CHANNELS),
            collections=scope.collections, filters=scope.proto_filters(), parent_context_tokens=parent_tokens,
            with_embeddings=profile.mmr_lambda is not None and "mmr" not in disabled,
            translation=understood.translation,
        )


def _read_outcome(task: asyncio.Task) -> None:
    """Marks ``task``'s exception, if any, as retrieved."""
    if not task.cancelled():
        task.exception()
