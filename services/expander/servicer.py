"""ExpanderService: thin gRPC layer over ``core`` and the embedder."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc

import domains

from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2, expander_pb2_grpc
from services.common.errors import InvalidArgument, validate_query
from services.common.llm import LlmClient
from services.expander import core, llm_expansion
from services.expander.config import ExpanderSettings
from services.expander.embedding import CachedEmbedder, build_embedder, cache_name, open_embedding_cache
from services.expander.query_cut import METHOD_CONTENT, METHOD_HEAD, METHOD_WHOLE, QueryCut, cut_for_embedding

_CUT_METHODS = {
    METHOD_WHOLE: types_pb2.QUERY_CUT_METHOD_WHOLE,
    METHOD_CONTENT: types_pb2.QUERY_CUT_METHOD_CONTENT_SENTENCES,
    METHOD_HEAD: types_pb2.QUERY_CUT_METHOD_HEAD,
}


class ExpanderServicer(expander_pb2_grpc.ExpanderServiceServicer):
    """Loads the embedding model lazily, once per process."""

    def __init__(self, settings: ExpanderSettings) -> None:
        self._settings = settings
        self._embedder: CachedEmbedder | None = None
        self._load_lock = asyncio.Lock()
        self._llm = LlmClient(settings.llm.config())

    async def close(self) -> None:
        """Releases the LLM client's connections."""
        await self._llm.close()

    async def embedder(self) -> CachedEmbedder:
        """The embedder, loaded on first use."""
        async with self._load_lock:
            if self._embedder is None:
                s = self._settings
                inner = await asyncio.to_thread(build_embedder, s.embedding.model, s.embedding.threads,
                                                small_call_threads=s.embedding.small_call_threads)
                cache = open_embedding_cache(Path(s.embedding.cache), cache_name(inner)) if s.embedding.cache else None
                self._embedder = CachedEmbedder(inner, cache, window_chars=s.embedding.window_chars)
            return self._embedder

    async def Expand(self, request: expander_pb2.ExpandRequest, context: grpc.aio.ServicerContext) -> expander_pb2.ExpandResponse:
        query = validate_query(request.query, self._settings.max_query_chars)
        packs = list(request.domain_packs)
        unknown = [p for p in packs if p not in domains.PACKS]
        if unknown:
            raise InvalidArgument("domain_packs", f"unknown domain pack {unknown[0]!r}; known: {', '.join(sorted(domains.PACKS))}")
        analysis = await asyncio.to_thread(core.analyse, query, self._settings.max_keywords, packs)
        type_names = expander_pb2.QuestionType.keys()
        response = expander_pb2.ExpandResponse(
            normalized_query=analysis.normalized_query,
            keywords=analysis.keywords,
            question_type=expander_pb2.QuestionType.Value(analysis.question_type) if analysis.question_type in type_names else 0,
            question_type_name=analysis.question_type,
            question_type_confidence=analysis.confidence,
            expansions=[expander_pb2.Expansion(text=t, origin=o) for t, o in analysis.expansions],
            translation=types_pb2.QueryTranslation(
                script=analysis.translated_script,
                words=[types_pb2.TranslatedWord(word=w, terms=terms, synonyms=synonyms)
                       for w, terms, synonyms in analysis.translated_words]),
        )
        chars = len(analysis.normalized_query)
        cut = QueryCut("", chars, 0, METHOD_WHOLE, [])
        if request.embed:
            embedder = await self.embedder()
            cut, vectors = await asyncio.to_thread(self._embed_query, embedder, analysis.normalized_query)
            response.embedding.extend(vectors[0].tolist())
            response.embedding_model = embedder.name
        response.query_cut.CopyFrom(types_pb2.QueryCut(
            method=_CUT_METHODS[cut.method], original_chars=cut.original_chars, embedded_chars=cut.embedded_chars,
            kept_spans=[types_pb2.TextSpan(start=a, end=b) for a, b in cut.spans],
            keywords_found=analysis.keywords_found,
        ))
        return response

    def _embed_query(self, embedder: CachedEmbedder, text: str):
        """(cut, vectors (1, dimension)) of a normalised query: the part
        chosen by ``query_cut.cut_for_embedding`` is embedded."""
        cut = cut_for_embedding(text, embedder.query_window(), method=self._settings.query_cut)
        vectors, _ = embedder.embed_with_stats([cut.text], query=True)
        return cut, vectors

    async def Embed(self, request: expander_pb2.EmbedRequest, context: grpc.aio.ServicerContext) -> expander_pb2.EmbedResponse:
        if not request.texts:
            raise InvalidArgument("texts", "must not be empty")
        if len(request.texts) > self._settings.max_batch:
            raise InvalidArgument("texts", f"at most {self._settings.max_batch} texts per call")
        embedder = await self.embedder()
        query = request.kind == expander_pb2.EMBED_KIND_QUERY
        remaining = context.time_remaining()
        deadline = None if remaining is None else time.monotonic() + remaining
        vectors, hits = await asyncio.to_thread(embedder.embed_with_stats, list(request.texts), query=query,
                                                deadline=deadline)
        return expander_pb2.EmbedResponse(
            vectors=[expander_pb2.Vector(values=v.tolist()) for v in vectors],
            model=embedder.name,
            dimension=embedder.dimension,
            cache_hits=hits,
        )

    async def Rewrite(self, request: expander_pb2.RewriteRequest, context: grpc.aio.ServicerContext) -> expander_pb2.RewriteResponse:
        query = validate_query(request.query, self._settings.max_query_chars)
        if request.kind == expander_pb2.REWRITE_KIND_UNSPECIFIED:
            raise InvalidArgument("kind", "must be EXPANDED_QUERY, HYDE or SUB_QUERIES")
        if not 0 <= request.max_results <= 10:
            raise InvalidArgument("max_results", "must be 0 (default 3) to 10")
        if request.timeout_seconds < 0:
            raise InvalidArgument("timeout_seconds", "must not be negative")
        n = request.max_results or 3
        timeout = request.timeout_seconds or self._settings.llm.timeout
        left = context.time_remaining()
        if left is not None:
            # Leave a quarter of the caller's deadline for the rule fallback
            # and the embedding of the sub-queries.
            timeout = max(0.001, min(timeout, 0.75 * left))
        analysis = await asyncio.to_thread(core.analyse, query, self._settings.max_keywords)
        result = await llm_expansion.rewrite(
            self._llm, expander_pb2.RewriteKind.Name(request.kind), analysis.normalized_query,
            request.context, n, analysis.keywords, timeout, domains.rewrite_prompts(list(request.domain_packs)),
        )
        rewrites = result.rewrites
        if rewrites and request.kind == expander_pb2.REWRITE_KIND_SUB_QUERIES:
            # Score against the question (MetaSearch) and keep the best first.
            embedder = await self.embedder()
            texts = [analysis.normalized_query] + [t for t, _, _ in rewrites]
            vectors, _ = await asyncio.to_thread(embedder.embed_with_stats, texts, query=True)
            scores = llm_expansion.cosine_scores(vectors[0], vectors[1:])
            rewrites = sorted(((t, s, o) for (t, _, o), s in zip(rewrites, scores)), key=lambda r: -r[1])
        return expander_pb2.RewriteResponse(
            rewrites=[expander_pb2.Rewrite(text=t, score=s, origin=o) for t, s, o in rewrites],
            llm_used=result.llm_used,
            fallback_reason=result.fallback_reason,
        )
