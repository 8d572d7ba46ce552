"""Orchestration of Search, Answer and Ingest across the services.

The gateway holds no retrieval logic: it calls the expander, fans out to every
retriever in parallel under the caller's remaining deadline, optionally asks
the reranker, lets the fuser merge and pack, and generates the answer. An
optional service that fails or times out is recorded in ``degraded`` and the
response is built without it.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import grpc

from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from graphmesh.fuser.v1 import fuser_pb2, fuser_pb2_grpc
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from graphmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common import text as textutil
from services.common.chunking import ChunkingConfig, chunk_document, embedding_text
from services.common.clients import channel
from services.common.convert import record_to_chunked_document
from services.common.jsonl_documents import parse_jsonl
from services.common.metrics import STAGE_SECONDS
from services.common.settings import MeshAddresses
from services.gateway.config import GatewaySettings, RetrievalProfile

log = logging.getLogger("graphmesh.gateway")

OK = types_pb2.STAGE_STATUS_OK
SKIPPED = types_pb2.STAGE_STATUS_SKIPPED
DEGRADED = types_pb2.STAGE_STATUS_DEGRADED


class Deadline:
    """Absolute deadline of one request (monotonic seconds)."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def left(self, cap: float) -> float:
        """Seconds left, at most ``cap``, at least 1 ms."""
        return max(0.001, min(cap, self._end - time.monotonic()))


@dataclass
class Trace:
    """Stage timings and degradations collected during one request."""

    timings: list[types_pb2.StageTiming] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)

    def record(self, stage: str, started: float, status: int = OK, detail: str = "") -> None:
        seconds = time.perf_counter() - started
        self.timings.append(types_pb2.StageTiming(stage=stage, duration_ms=seconds * 1000, status=status, detail=detail))
        STAGE_SECONDS.labels(stage, types_pb2.StageStatus.Name(status).removeprefix("STAGE_STATUS_").lower()).observe(seconds)


def _describe(err: BaseException) -> str:
    if isinstance(err, grpc.aio.AioRpcError):
        return f"{err.code().name}: {err.details()}"
    if isinstance(err, asyncio.TimeoutError):
        return "timed out"
    return type(err).__name__


@dataclass
class SearchOutcome:
    """Everything Search produced, for Answer to build on."""

    response: gateway_pb2.SearchResponse
    cited_ids: list[str]
    cited_texts: list[str]
    by_id: dict[str, types_pb2.Candidate]


class Pipeline:
    """Clients of every downstream service and the request flows."""

    def __init__(self, settings: GatewaySettings, addresses: MeshAddresses) -> None:
        self.settings = settings
        self._channels = {
            name: channel(getattr(addresses, f"{name}_addr"))
            for name in ("expander", "retriever_pg", "retriever_graph", "reranker", "fuser")
        }
        self.expander = expander_pb2_grpc.ExpanderServiceStub(self._channels["expander"])
        self.retrievers = {"retriever_pg": retriever_pb2_grpc.RetrieverServiceStub(self._channels["retriever_pg"])}
        if settings.graph_enabled:
            self.retrievers["retriever_graph"] = retriever_pb2_grpc.RetrieverServiceStub(self._channels["retriever_graph"])
        self.reranker = reranker_pb2_grpc.RerankerServiceStub(self._channels["reranker"])
        self.fuser = fuser_pb2_grpc.FuserServiceStub(self._channels["fuser"])
        self._answer_flow = None

    async def close(self) -> None:
        """Closes every channel (and the LLM client)."""
        if self._answer_flow is not None:
            await self._answer_flow.close()
        await asyncio.gather(*(c.close() for c in self._channels.values()))

    # ---- Search -------------------------------------------------------
    def profile_for(self, question_type: str, confidence: float) -> tuple[str, RetrievalProfile]:
        """The retrieval profile of a question type; "default" when the type
        has none or was detected with low confidence."""
        profiles = self.settings.profiles
        if confidence >= self.settings.profile_min_confidence and question_type in profiles:
            return question_type, profiles[question_type]
        return "default", profiles.get("default", RetrievalProfile())

    async def search(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline,
                     disabled: frozenset[str] = frozenset()) -> SearchOutcome:
        """Runs expand -> retrieve (parallel) -> rerank -> fuse for ``query``.

        ``disabled`` switches stages or retriever channels off (ablations):
        "graph", "mmr", "rerank" or channel names such as "pg.vector".
        """
        s = self.settings
        trace = Trace()
        total_started = time.perf_counter()

        started = time.perf_counter()
        info = gateway_pb2.QueryInfo(normalized_query=query)
        embedding: list[float] = []
        keywords: list[str] = []
        question_type, confidence = "QUESTION_TYPE_UNSPECIFIED", 0.0
        try:
            expanded = await self.expander.Expand(
                expander_pb2.ExpandRequest(query=query, embed=True), timeout=deadline.left(s.expand_timeout)
            )
            info = gateway_pb2.QueryInfo(
                normalized_query=expanded.normalized_query,
                keywords=expanded.keywords,
                question_type=expander_pb2.QuestionType.Name(expanded.question_type),
            )
            keywords = list(expanded.keywords)
            embedding = list(expanded.embedding)
            question_type, confidence = info.question_type, expanded.question_type_confidence
            trace.record("expand", started)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise
            # Without the expander: keywords by the shared tokenizer, no vector channel.
            keywords = textutil.query_keywords(query)
            info.keywords.extend(keywords)
            trace.degraded.append("expander")
            trace.record("expand", started, DEGRADED, _describe(err))

        profile_name, profile = self.profile_for(question_type, confidence)
        info.profile = profile_name
        if profile.expansions and "expansion" not in disabled and keywords:
            keywords = await self._expand_keywords(keywords, profile.max_expansions, info, deadline, trace)
        hyde_embedding = await self._hyde_embedding(query, deadline, trace) if profile.hyde and "pg.hyde" not in disabled else []
        request = retriever_pb2.RetrieveRequest(
            query=info.normalized_query or query, keywords=keywords, query_embedding=embedding,
            hyde_embedding=hyde_embedding, top_k=profile.retrieve_top_k,
            disabled_channels=sorted(d for d in disabled if "." in d),
        )
        lists = await self._retrieve_all(request, deadline, trace, skip_graph="graph" in disabled)

        rerank_scores = await self._rerank(query, lists, False if "rerank" in disabled else rerank, deadline, trace)

        mmr_lambda = profile.mmr_lambda if "mmr" not in disabled else None
        outcome = await self.fuse_and_pack(query, lists, profile, top_k, deadline, trace, info, rerank_scores, mmr_lambda)
        trace.record("total", total_started)
        outcome.response.timings.append(trace.timings[-1])
        return outcome

    async def _expand_keywords(self, keywords: list[str], limit: int, info: gateway_pb2.QueryInfo,
                               deadline: Deadline, trace: Trace) -> list[str]:
        """``keywords`` plus the keywords of retriever_pg's expansion terms
        (L1 entity names, L2 entity definitions, L3 headings); each term is
        reported in ``info.expansions`` as "text (origin: matched keyword)".
        Unchanged, with the stage marked degraded, when the retriever fails."""
        stub = self.retrievers.get("retriever_pg")
        if stub is None:
            return keywords
        started = time.perf_counter()
        try:
            reply = await stub.SuggestExpansions(
                retriever_pb2.SuggestExpansionsRequest(keywords=keywords[:50], limit=limit),
                timeout=deadline.left(self.settings.retrieve_timeout))
        except grpc.aio.AioRpcError as err:
            trace.record("expansion", started, DEGRADED, _describe(err))
            return keywords
        merged = list(keywords)
        for e in reply.expansions:
            info.expansions.append(f"{e.text} ({e.origin}: {e.matched})")
            merged.extend(t for t in textutil.query_keywords(e.text) if t not in merged)
        trace.record("expansion", started)
        return merged

    async def fuse_and_pack(self, query: str, lists: list[fuser_pb2.CandidateList], profile: RetrievalProfile,
                            top_k: int, deadline: Deadline, trace: Trace, info: gateway_pb2.QueryInfo,
                            rerank_scores: dict[str, float] | None = None, mmr_lambda: float | None = None) -> SearchOutcome:
        """Asks the fuser to merge, fuse (by ``profile``) and pack ``lists``;
        without the fuser, candidates in arrival order and no packed context
        (reported degraded)."""
        s = self.settings
        started = time.perf_counter()
        fuse_request = fuser_pb2.FuseRequest(
            query=query,
            lists=lists,
            rerank_scores=rerank_scores or {},
            method=fuser_pb2.FUSION_METHOD_WEIGHTED if profile.fusion_method == "weighted" else fuser_pb2.FUSION_METHOD_RRF,
            channel_weights=profile.channel_weights,
            top_k=top_k,
            budget_chars=s.budget_chars,
        )
        if mmr_lambda is not None:
            fuse_request.mmr_lambda = mmr_lambda
        try:
            fused = await self.fuser.Fuse(fuse_request, timeout=deadline.left(s.fuse_timeout))
            trace.record("fuse", started)
        except grpc.aio.AioRpcError as err:
            trace.degraded.append("fuser")
            trace.record("fuse", started, DEGRADED, _describe(err))
            seen: dict[str, types_pb2.Candidate] = {}
            for lst in lists:
                for cand in lst.candidates:
                    seen.setdefault(cand.id, cand)
            fused = fuser_pb2.FuseResponse(candidates=list(seen.values())[:top_k])

        results = []
        for cand in fused.candidates:
            cand.ClearField("embedding")
            results.append(cand)
        by_id = {c.id: c for lst in lists for c in lst.candidates}
        by_id.update({c.id: c for c in results})
        cited_ids = [cid for sec in fused.context.sections for cid in sec.candidate_ids]
        response = gateway_pb2.SearchResponse(
            results=results, context=fused.context.text, timings=trace.timings, degraded=trace.degraded, query_info=info
        )
        return SearchOutcome(response, cited_ids, [by_id[c].text for c in cited_ids if c in by_id], by_id)

    async def _hyde_embedding(self, query: str, deadline: Deadline, trace: Trace) -> list[float]:
        """Embedding of a hypothetical answer passage written by the LLM
        (HyDE, MarxSphere V63 dual vector); [] and the stage reported
        skipped without an LLM, degraded when the expander fails."""
        started = time.perf_counter()
        try:
            reply = await self.expander.Rewrite(
                expander_pb2.RewriteRequest(query=query, kind=expander_pb2.REWRITE_KIND_HYDE, max_results=1),
                timeout=deadline.left(self.settings.expand_timeout),
            )
            if not reply.rewrites:
                trace.record("hyde", started, SKIPPED, reply.fallback_reason or "no LLM configured")
                return []
            embedded = await self.expander.Embed(
                expander_pb2.EmbedRequest(texts=[reply.rewrites[0].text], kind=expander_pb2.EMBED_KIND_PASSAGE),
                timeout=deadline.left(self.settings.expand_timeout),
            )
            trace.record("hyde", started)
            return list(embedded.vectors[0].values)
        except grpc.aio.AioRpcError as err:
            trace.degraded.append("hyde")
            trace.record("hyde", started, DEGRADED, _describe(err))
            return []

    async def _retrieve_all(self, request: retriever_pb2.RetrieveRequest, deadline: Deadline, trace: Trace,
                            skip_graph: bool = False) -> list[fuser_pb2.CandidateList]:
        async def one(name: str, stub: retriever_pb2_grpc.RetrieverServiceStub):
            started = time.perf_counter()
            try:
                response = await stub.Retrieve(request, timeout=deadline.left(self.settings.retrieve_timeout))
                trace.record(f"retrieve.{name.removeprefix('retriever_')}", started)
                return fuser_pb2.CandidateList(producer=name, candidates=response.candidates)
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise
                trace.degraded.append(name)
                trace.record(f"retrieve.{name.removeprefix('retriever_')}", started, DEGRADED, _describe(err))
                return None

        retrievers = {n: r for n, r in self.retrievers.items() if not (skip_graph and n == "retriever_graph")}
        results = await asyncio.gather(*(one(n, s) for n, s in retrievers.items()))
        if len(retrievers) < 2:
            trace.timings.append(types_pb2.StageTiming(stage="retrieve.graph", status=SKIPPED, detail="graph disabled"))
        return [r for r in results if r is not None]

    async def _rerank(self, query: str, lists: list[fuser_pb2.CandidateList], rerank: bool | None, deadline: Deadline, trace: Trace) -> dict[str, float]:
        enabled = self.settings.rerank_enabled if rerank is None else rerank
        if not enabled:
            trace.timings.append(types_pb2.StageTiming(stage="rerank", status=SKIPPED, detail="rerank off"))
            return {}
        started = time.perf_counter()
        passages: dict[str, str] = {}
        for lst in lists:
            for cand in lst.candidates:
                if len(passages) < self.settings.rerank_max_passages:
                    passages.setdefault(cand.id, f"{' '.join(cand.heading_path)}\n{cand.text}")
        if not passages:
            trace.record("rerank", started, SKIPPED, "no candidates")
            return {}
        try:
            response = await self.reranker.Rerank(
                reranker_pb2.RerankRequest(query=query, passages=[reranker_pb2.Passage(id=i, text=t) for i, t in passages.items()]),
                timeout=deadline.left(self.settings.rerank_timeout),
            )
            trace.record("rerank", started)
            return {s.id: s.score for s in response.scores}
        except grpc.aio.AioRpcError as err:
            trace.degraded.append("reranker")
            trace.record("rerank", started, DEGRADED, _describe(err))
            return {}

    # ---- Answer -------------------------------------------------------
    @property
    def answer_flow(self):
        """The Answer path (fallback chain, generation, deep retrieval):
        services.gateway.answering.AnswerFlow, created on first use."""
        if self._answer_flow is None:
            from services.gateway.answering import AnswerFlow

            self._answer_flow = AnswerFlow(self)
        return self._answer_flow

    async def answer(self, query: str, top_k: int, rerank: bool | None, deadline: Deadline) -> gateway_pb2.AnswerResponse:
        """The fallback chain, then an LLM answer with citations over the
        packed context, or an extractive one when no LLM is configured or
        the LLM fails. See AnswerFlow.answer_events."""
        return await self.answer_flow.answer(query, top_k, rerank, deadline)

    # ---- Ingest -------------------------------------------------------
    async def ingest(self, payload: bytes, deadline: Deadline) -> tuple[gateway_pb2.IngestResponse, list]:
        """Parses, skips unchanged documents, chunks, embeds and stores in
        every retriever. Returns the response and the parse failures (so the
        servicer can reject a payload with no readable record)."""
        s = self.settings
        trace = Trace()
        started = time.perf_counter()
        docs, parse_failures = parse_jsonl(payload)
        response = gateway_pb2.IngestResponse(received=len(docs) + len(parse_failures))
        response.failures.extend(
            types_pb2.IngestFailure(index=f.index, id=f.id, reason=f"{f.field + ': ' if f.field else ''}{f.reason}")
            for f in parse_failures
        )
        trace.record("parse", started)
        if not docs:
            return response, parse_failures

        # Keep only the last record of each id, then compare content hashes.
        latest = {d.id: d for d in docs}
        config = ChunkingConfig(s.chunk_chars, s.chunk_overlap)
        records = {d.id: chunk_document(d.id, d.title, d.heading_path, d.text, d.metadata, config) for d in latest.values()}
        started = time.perf_counter()
        stored_hashes = await asyncio.gather(*(
            stub.GetDocumentHashes(retriever_pb2.GetDocumentHashesRequest(document_ids=list(records)), timeout=deadline.left(30))
            for stub in self.retrievers.values()
        ))
        unchanged = {
            doc_id for doc_id, rec in records.items()
            if all(h.content_hashes.get(doc_id) == rec.content_hash for h in stored_hashes)
        }
        response.unchanged = len(unchanged)
        todo = [records[i] for i in records if i not in unchanged]
        trace.record("hash_check", started)
        if not todo:
            response.timings.extend(trace.timings)
            return response, parse_failures

        started = time.perf_counter()
        chunks = [c for rec in todo for c in rec.chunks]
        texts = [embedding_text(c) for c in chunks]
        for start in range(0, len(texts), s.embed_batch):
            embedded = await self.expander.Embed(
                expander_pb2.EmbedRequest(texts=texts[start : start + s.embed_batch], kind=expander_pb2.EMBED_KIND_PASSAGE),
                timeout=deadline.left(600),
            )
            for chunk, vector in zip(chunks[start : start + s.embed_batch], embedded.vectors):
                chunk.embedding = list(vector.values)
        trace.record("embed", started)

        started = time.perf_counter()
        index_of = {d.id: d.index for d in latest.values()}
        text_of = {d.id: d.text for d in latest.values()}
        batch = retriever_pb2.IngestDocumentsRequest(documents=[record_to_chunked_document(r, text_of[r.id]) for r in todo])
        results = await asyncio.gather(
            *(stub.IngestDocuments(batch, timeout=deadline.left(600)) for stub in self.retrievers.values()),
            return_exceptions=True,
        )
        failed: dict[str, str] = {}
        for name, result in zip(self.retrievers, results):
            if isinstance(result, BaseException):
                for rec in todo:
                    failed.setdefault(rec.id, f"{name}: {_describe(result)}")
                continue
            for f in result.failures:
                doc_id = f.id or todo[f.index].id
                failed.setdefault(doc_id, f"{name}: {f.reason}")
        trace.record("store", started)
        response.stored = len(todo) - len(failed)
        response.chunks = sum(len(r.chunks) for r in todo if r.id not in failed)
        response.failures.extend(types_pb2.IngestFailure(index=index_of[i], id=i, reason=r) for i, r in failed.items())
        response.timings.extend(trace.timings)
        return response, parse_failures
