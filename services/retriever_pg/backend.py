"""retriever_pg's backends over PostgreSQL, and the async factory that
opens the store and builds them at startup.

Document channels (``PgBackend``), run concurrently:

- ``pg.vector``: HNSW cosine search with the query embedding, and with the
  HyDE passage embedding when one is given (MarxSphere V63 dual vector);
- ``pg.keyword``: Okapi BM25 over jieba terms;
- ``pg.translated``: the chunks of the documents written in the other
  writing system, by the same BM25 over the query's words translated into it
  (``RetrievalQuery.translated_words``, from the expander's dictionary) and by
  cosine among those chunks alone, fused by RRF; offered to the fuser's
  cross-script step where the collections mix both systems, fused as the
  keyword channel's stand-in where they hold the other system only;
- ``pg.fulltext``: tsvector/GIN match ordered by hit count then length;
- ``pg.trigram``: pg_trgm substring / word similarity, only for short
  queries (at most ``short_query_chars``) or queries without keywords;
- ``pg.boost``: same-document neighbours of the top keyword hits when hits
  concentrate in a document (MarxSphere V88A,
  the MarxSphere design (docs/references.md) section 3); it finds
  nothing for single-chunk records (law articles) and brings the chunks
  around the hits of a long document (a PDF chapter).

Parent context (``RetrievalQuery.parent_context_tokens`` > 0): each
channel's first ``parent_top`` hits get ``Hit.context_text``, their section
around them (``parent_context.parent_window``), read with one query.

Every channel searches only the request's collections and the documents
meeting its metadata filters, inside its own query (before its top_k).

Hits carry their stored chunk embedding only when the request asks for it
(``RetrievalQuery.with_embeddings``, for the fuser's MMR); otherwise no
channel's query reads it (no step here uses hit embeddings).

Entity channels (``PgEntityBackend``, entity cards): ``pg.entity_keyword``
(BM25 over character grams) and ``pg.entity_vector`` (closest surface).
"""
from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from graphmesh.common.v1 import types_pb2

from services.common import names
from services.common.errors import InvalidArgument
from services.common.script_centring import centred_cosines
from services.common.records import Deletion, DocumentRecord, EntityExport, EntityRecord, ExpansionTerm, Hit, IngestResult
from services.common.store_deadline import QueryBudget
from services.common.text import keyword_terms
from services.common.retriever import EntityQuery, EntityRetrieval, LibrarySnapshot, RelatedQuery, RetrievalQuery, StoreLifecycle, timing
from services.retriever_pg.config import RetrieverPgSettings
from services.retriever_pg import entity_edit
from services.retriever_pg.entity_store import EntityCard, EntityCardStore
from services.retriever_pg.expansions import suggest_expansions
from services.retriever_pg.parent_context import parent_window
from services.retriever_pg.store import PgStore

#: Largest magnitude a float4 (pgvector's element type) holds.
FLOAT4_MAX = 3.4028234663852886e38


def check_vector(field: str, vector: list[float], dim: int) -> None:
    """Raises InvalidArgument naming ``field`` unless ``vector`` has ``dim``
    values, each finite as a float4, not all zero. (Found by fuzzing, issue
    16: a query embedding of another dimension, NaN or 1e300 reached the
    store and came back INTERNAL.)"""
    if len(vector) != dim:
        raise InvalidArgument(field, f"has {len(vector)} values, expected {dim}")
    if not all(math.isfinite(v) and abs(v) <= FLOAT4_MAX for v in vector) or not any(vector):
        raise InvalidArgument(field, "must be finite (as float4) and non-zero")


@dataclass(frozen=True, slots=True)
class PgChannelConfig:
    """Channel switches and sizes.

    Attributes:
        fulltext / trigram / boost: whether those channels run by default.
        short_query_chars: queries at most this long (characters) use trigrams.
        boost_window: neighbour distance in chunk ordinals.
        boost_limit: most boosted chunks (reference default 10).
        boost_min_hits: keyword hits in one document that count as concentrated.
        parent_top: hits per channel that get a parent context when asked.
        parent_window: most chunk ordinals read on each side of a hit for its
            parent context (the token budget decides what is kept).
    """

    fulltext: bool = True
    trigram: bool = True
    boost: bool = True
    short_query_chars: int = 4
    boost_window: int = 2
    boost_limit: int = 10
    boost_min_hits: int = 2
    parent_top: int = 10
    parent_window: int = 3


#: RRF constant of pg.translated's two lists (the usual 60, Cormack et al. 2009).
TRANSLATED_RRF_K = 60


class PgBackend(StoreLifecycle):
    """RetrievalBackend over a PgStore."""

    # pg.translated's chunks are document chunks found by cosine as well: they take that source's context
    # quota (35% of the budget), not full text's 10%, which cut a 384-word English chunk off before its answer
    source_by_channel = {
        names.PG_VECTOR: types_pb2.SOURCE_DOCUMENT_CHUNK,
        names.PG_CENTRED: types_pb2.SOURCE_DOCUMENT_CHUNK,
        names.PG_HYDE: types_pb2.SOURCE_DOCUMENT_CHUNK,
        names.PG_ADAPTED: types_pb2.SOURCE_DOCUMENT_CHUNK,
        names.PG_TRANSLATED: types_pb2.SOURCE_DOCUMENT_CHUNK,
        names.PG_KEYWORD: types_pb2.SOURCE_FULLTEXT,
        names.PG_FULLTEXT: types_pb2.SOURCE_FULLTEXT,
        names.PG_TRIGRAM: types_pb2.SOURCE_FULLTEXT,
        names.PG_BOOST: types_pb2.SOURCE_DOCUMENT_CHUNK,
    }

    def __init__(self, store: PgStore, config: PgChannelConfig | None = None) -> None:
        self.store = store
        self.config = config or PgChannelConfig()

    async def _timed(self, stage: str, search) -> list[tuple[str, list[Hit], types_pb2.StageTiming]]:
        # ``search`` makes the coroutine only here: one made up front and
        # cancelled before its task ran would never be awaited (a warning).
        started = time.perf_counter()
        hits = await search()
        return [(stage, hits, timing(stage, started))]

    async def _keyword_channels(self, keywords: list[str], top_k: int, scope: tuple, vectors: bool, bm25: bool,
                                fulltext: bool) -> list[tuple[str, list[Hit], types_pb2.StageTiming]]:
        """pg.keyword and pg.fulltext from one read of the postings; both
        channels' timings are the time of the whole call."""
        started = time.perf_counter()
        found = await self.store.keyword_channels(keywords, top_k, *scope, bm25=bm25, fulltext=fulltext,
                                                  with_embeddings=vectors)
        return [(channel, hits, timing(channel, started)) for channel, hits in found.items()]

    async def script_centroids(self, collections: list[str]) -> dict[str, np.ndarray]:
        """The store's ``script_centroids`` of ``collections`` (kept by the store)."""
        return await self.store.script_centroids(collections)

    async def _dense(self, request: RetrievalQuery, scope: tuple) -> list[tuple[str, list[Hit], types_pb2.StageTiming]]:
        """pg.vector (the nearest chunks by cosine) and, where the
        collections searched hold documents of two or more writing systems,
        pg.centred: each system's nearest chunks re-scored by cosine with
        their system's centroid removed (``script_centring``), the best top_k
        of them. One nearest-chunks search per system serves both lists
        there (the overall top_k by cosine is the best top_k of the
        systems' own; documents of no writing system, "", are searched as
        one more and keep their plain cosine in pg.centred). Either list is
        left out when its channel is off; pg.centred also when a system has
        too few chunks for a centroid (``PgStore.script_centroids``)."""
        started = time.perf_counter()
        k, vectors = request.top_k, request.with_embeddings
        held = sorted(await self.store.collection_scripts(request.collections))  # "" too: documents without letters
        if len([s for s in held if s]) < 2 or not request.enabled(names.PG_CENTRED):
            if not request.enabled(names.PG_VECTOR):
                return []
            hits = await self.store.vector_search(request.embedding, k, *scope, with_embeddings=vectors)
            return [(names.PG_VECTOR, hits, timing(names.PG_VECTOR, started))]
        per_script, centroids = await asyncio.gather(
            asyncio.gather(*(self.store.vector_search(request.embedding, k, *scope, with_embeddings=True, script=s)
                             for s in held)),
            self.store.script_centroids(request.collections))
        found = [h for part in per_script for h in part]
        out = []
        if request.enabled(names.PG_VECTOR):
            nearest = sorted(found, key=lambda h: (-h.score, h.chunk_id))[:k]
            out.append((names.PG_VECTOR, [replace(h, embedding=h.embedding if vectors else []) for h in nearest],
                        timing(names.PG_VECTOR, started)))
        if not {s for s in held if s} <= centroids.keys():
            return out  # a system too small to have a centroid (one English note among Chinese files): no centring
        scores = centred_cosines(request.embedding, [h.embedding for h in found], [h.script for h in found], centroids)
        ranked = sorted(zip(scores, found), key=lambda sh: (-sh[0], sh[1].chunk_id))[:k]
        centred = [replace(h, channel=names.PG_CENTRED, score=score, evidence="cosine, writing systems centred",
                           embedding=h.embedding if vectors else []) for score, h in ranked]
        out.append((names.PG_CENTRED, centred, timing(names.PG_CENTRED, started)))
        return out

    async def _translated(self, request: RetrievalQuery, scope: tuple) -> list[Hit]:
        """pg.translated: the chunks of documents written in
        ``request.translated_script`` (not run unless the collections searched
        hold documents in that system, ``collection_scripts``), found two ways and fused by RRF
        (k = TRANSLATED_RRF_K): BM25 over the query's translated terms (asked
        for twice top_k, since a product name a Chinese question keeps in
        English also matches Chinese chunks, which are left out), and cosine
        to the query embedding among those documents' chunks alone (a
        bi-encoder ranks every passage in the question's language above the
        other language's, so the other's best must be looked for there).
        Each hit's score is its cosine to the query (read for the chunks only
        BM25 found), its rank the fused order: the fuser compares that
        cosine with the best in the question's own language
        (``services.fuser.core.cross_script_first``)."""
        script = request.translated_script
        held = await self.store.collection_scripts(request.collections)
        if script not in held:
            # the collections are written in the question's own system only (every law collection asked in
            # Chinese): no chunk to translate into. Where they hold the other system only (a Chinese question
            # over English documents), this is the one channel whose words can meet the passages.
            return []
        terms = [t for _, found, _ in request.translated_words for t in found]

        async def by_words() -> list[Hit]:
            if not terms:
                return []
            found = await self.store.keyword_channels(terms, 2 * request.top_k, *scope, bm25=True, fulltext=False,
                                                      with_embeddings=request.with_embeddings)
            return [h for h in found[names.PG_KEYWORD] if h.script == script][: request.top_k]

        async def by_cosine() -> list[Hit]:
            if not request.embedding:
                return []
            return await self.store.vector_search(request.embedding, request.top_k, *scope,
                                                  with_embeddings=request.with_embeddings, script=script)

        worded, dense = await asyncio.gather(by_words(), by_cosine())
        fused: dict[str, float] = {}
        for ranked in (worded, dense):
            for position, h in enumerate(ranked, start=1):
                fused[h.chunk_id] = fused.get(h.chunk_id, 0.0) + 1.0 / (TRANSLATED_RRF_K + position)
        kept = sorted(fused, key=lambda c: (-fused[c], c))[: request.top_k]
        cosine = {h.chunk_id: h.score for h in dense}
        missing = [cid for cid in kept if cid not in cosine]
        if missing and request.embedding:
            cosine.update(await self.store.cosines(request.embedding, missing))
        by_id = {h.chunk_id: h for h in [*dense, *worded]}
        found_by = (("translated words", {h.chunk_id for h in worded}), ("cosine", {h.chunk_id for h in dense}))
        hits = []
        for cid in kept:
            h = by_id[cid]
            h.channel, h.score = names.PG_TRANSLATED, cosine.get(cid, 0.0)
            h.evidence = " and ".join(label for label, ids in found_by if cid in ids)
            hits.append(h)
        return hits

    async def _cosine_channel(self, channel: str, evidence: str, embedding: list[float], top_k: int, scope: tuple,
                              with_embeddings: bool) -> list[Hit]:
        """The chunks nearest ``embedding`` (HNSW cosine), as hits of ``channel`` (pg.hyde, pg.adapted)."""
        hits = await self.store.vector_search(embedding, top_k, *scope, with_embeddings=with_embeddings)
        for h in hits:
            h.channel, h.evidence = channel, evidence
        return hits

    async def retrieve(self, request: RetrievalQuery) -> tuple[list[Hit], list[types_pb2.StageTiming]]:
        """Raises InvalidArgument when an embedding has the wrong dimension,
        a value that is not finite as float4, or is all zeros."""
        cfg, k = self.config, request.top_k
        if request.embedding:
            check_vector("query_embedding", request.embedding, self.store.embedding_dim)
        for field_name in ("hyde_embedding", "adapted_embedding"):
            if getattr(request, field_name):
                check_vector(field_name, getattr(request, field_name), self.store.embedding_dim)
        scope = (request.collections, request.filters)
        vectors = request.with_embeddings
        jobs = []
        if request.embedding and (request.enabled(names.PG_VECTOR) or request.enabled(names.PG_CENTRED)):
            jobs.append(self._dense(request, scope))
        if request.hyde_embedding and request.enabled(names.PG_HYDE):
            jobs.append(self._timed(names.PG_HYDE, lambda: self._cosine_channel(
                names.PG_HYDE, "cosine to HyDE passage", request.hyde_embedding, k, scope, vectors)))
        if request.adapted_embedding and request.enabled(names.PG_ADAPTED):
            jobs.append(self._timed(names.PG_ADAPTED, lambda: self._cosine_channel(
                names.PG_ADAPTED, "cosine to the adapted query", request.adapted_embedding, k, scope, vectors)))
        bm25 = bool(request.keywords) and request.enabled(names.PG_KEYWORD)
        fulltext = bool(request.keywords) and cfg.fulltext and request.enabled(names.PG_FULLTEXT)
        if bm25 or fulltext:
            terms = keyword_terms(request.query, request.keywords)
            jobs.append(self._keyword_channels(terms, k, scope, vectors, bm25, fulltext))
        if request.translated_words and request.enabled(names.PG_TRANSLATED):
            jobs.append(self._timed(names.PG_TRANSLATED, lambda: self._translated(request, scope)))
        short = len(request.query) <= cfg.short_query_chars or not request.keywords
        if short and cfg.trigram and request.enabled(names.PG_TRIGRAM):
            jobs.append(self._timed(names.PG_TRIGRAM, lambda: self.store.trigram_search(
                request.query, k, *scope, with_embeddings=vectors)))
        results = [r for found in await asyncio.gather(*jobs) for r in found]
        hits = [h for _, part, _ in results for h in part]
        timings = [t for _, _, t in results]

        keyword_hits = next((part for name, part, _ in results if name == names.PG_KEYWORD), [])
        if cfg.boost and request.enabled(names.PG_BOOST) and keyword_hits:
            per_document = Counter(h.document_id for h in keyword_hits)
            seeds = [h.chunk_id for h in keyword_hits if per_document[h.document_id] >= cfg.boost_min_hits]
            if seeds:
                [(_, boosted, t)] = await self._timed(
                    names.PG_BOOST, lambda: self.store.neighbour_chunks(seeds, cfg.boost_window, cfg.boost_limit,
                                                                        with_embeddings=vectors)
                )
                hits.extend(boosted)
                timings.append(t)
        if request.parent_context_tokens > 0 and hits:
            await self._add_parent_context(hits, request.parent_context_tokens)
        return hits, timings

    async def _add_parent_context(self, hits: list[Hit], budget_tokens: int) -> None:
        """Sets ``context_text`` on each channel's first ``parent_top`` hits
        (every hit of those chunks), their section within ``budget_tokens``."""
        rank: Counter[str] = Counter()
        wanted: list[str] = []
        for h in hits:
            rank[h.channel] += 1
            if rank[h.channel] <= self.config.parent_top:
                wanted.append(h.chunk_id)
        sections = await self.store.section_chunks(wanted, self.config.parent_window)
        windows = {cid: parent_window(ordinal, chunks, budget_tokens) for cid, (ordinal, chunks) in sections.items()}
        for h in hits:
            h.context_text = windows.get(h.chunk_id, "")

    async def ingest_documents(self, docs: list[DocumentRecord]) -> IngestResult:
        return await self.store.ingest_documents(docs)

    async def document_hashes(self, ids: list[str]) -> dict[str, str]:
        return await self.store.document_hashes(ids)

    async def suggest_expansions(self, keywords: list[str], limit: int, collections: list[str]) -> list[ExpansionTerm]:
        return await suggest_expansions(self.store.connection, keywords, limit=limit, collections=collections)

    async def related(self, request: RelatedQuery) -> tuple[list[Hit], list[types_pb2.StageTiming]]:
        raise NotImplementedError("retriever_pg has no related channels")


class PgEntityBackend:
    """EntityBackend over the entity cards: keyword and vector channels.
    Facts (triples) and the library itself live in the graph retriever."""

    def __init__(self, cards: EntityCardStore) -> None:
        self.cards = cards

    async def ingest_entities(self, entities: list[EntityRecord], collection: str, replace: bool = False) -> IngestResult:
        # A card is always stored whole (replace or not): nothing is left to unlink.
        return await self.cards.ingest([
            EntityCard(name=e.name, category=e.category, definition=e.definition, aliases=e.aliases, parents=e.parents,
                       surface_embeddings=e.surface_embeddings)
            for e in entities
        ], collection)

    async def ingest_triples(self, triples: list[tuple[str, str, str]], collection: str) -> tuple[int, list[tuple[int, str]]]:
        raise NotImplementedError("facts live in the graph retriever")

    async def export_entities(self, collection: str, names: list[str], page_size: int, after: str,
                              with_links: bool) -> EntityExport:
        return await entity_edit.export(self.cards, collection, names, page_size, after, with_links)

    async def remove_entities(self, collection: str, names: list[str]) -> tuple[Deletion, list[str]]:
        return await entity_edit.delete(self.cards, collection, names)

    async def delete_triples(self, triples: list[tuple[str, str, str]], collection: str) -> int:
        raise NotImplementedError("facts live in the graph retriever")

    async def entity_counts(self) -> dict[str, int]:
        return await self.cards.collection_counts()

    async def delete_entities(self, collection: str) -> Deletion:
        return Deletion(entities=await self.cards.delete_collection(collection))

    async def retrieve_entities(self, query: EntityQuery) -> EntityRetrieval:
        """Raises InvalidArgument when the query embedding has the wrong
        dimension, a non-finite value or is all zeros."""
        async def timed(stage: str, coro):
            started = time.perf_counter()
            hits = await coro
            return hits, timing(stage, started)

        jobs = [timed(names.ENTITY_CARD_KEYWORD, self.cards.keyword_search(query.query, query.top_k, query.collections))]
        vector = query.query_embedding
        if vector:
            check_vector("query_embedding", vector, self.cards.embedding_dim)
            jobs.append(timed(names.ENTITY_CARD_VECTOR, self.cards.vector_search(vector, query.top_k, query.collections)))
        results = await asyncio.gather(*jobs)
        return EntityRetrieval([h for part, _ in results for h in part], [t for _, t in results])

    async def entity_library(self, known_version: int | None) -> LibrarySnapshot:
        raise NotImplementedError("the entity library is served by the graph retriever")


@dataclass
class PgBackends:
    """What retriever_pg serves from, and how to close it."""

    documents: PgBackend
    entities: PgEntityBackend
    store: PgStore

    async def close(self) -> None:
        """Closes the connection pool."""
        await self.store.close()

    async def warm_up(self) -> None:
        """One cheap real query through every document channel and the
        entity cards (keyword, vector, full text, trigram; top_k 1), so the
        plans, the indexes' first pages and the BM25 statistics are loaded
        before the first user request. Errors of the store propagate (the
        caller retries: ``services.common.server.Readiness``)."""
        unit = [1.0] + [0.0] * (self.store.embedding_dim - 1)
        await self.documents.retrieve(RetrievalQuery(query="预热", keywords=["预热"], embedding=unit, top_k=1))
        await self.entities.retrieve_entities(EntityQuery(query="预热", top_k=1, query_embedding=unit))


async def open_backends(settings: RetrieverPgSettings) -> PgBackends:
    """Opens the pool (starting the embedded PostgreSQL first when no DSN is
    set), applies the migrations and builds both backends.

    Raises:
        asyncpg.PostgresError / OSError: the database cannot be reached.
    """
    dsn = settings.dsn
    if not dsn:
        from services.retriever_pg.embedded import start_embedded_postgres

        dsn = await asyncio.to_thread(start_embedded_postgres, Path(settings.data_dir))
    store = PgStore(dsn, settings.embedding_dim, ef_search=settings.ef_search, pool_max=settings.pool_max,
                    bm25_k1=settings.bm25.k1, bm25_b=settings.bm25.b,
                    budget=QueryBudget(read_ceiling=settings.store.statement_timeout_max),
                    connect_timeout=settings.store.connect_timeout,
                    max_inactive_connection_lifetime=settings.store.max_inactive_connection_lifetime,
                    index_build_mem_max_mb=settings.store.index_build_mem_max_mb,
                    keyword_cache_mb=settings.store.keyword_cache_mb,
                    initial_load_quiet_s=settings.store.initial_load_quiet_s)
    await store.open()
    try:
        await store.migrate()
    except BaseException:
        await store.close()
        raise
    channels = PgChannelConfig(
        fulltext=settings.fulltext_enabled, trigram=settings.trigram_enabled, boost=settings.boost.enabled,
        short_query_chars=settings.short_query_chars, boost_window=settings.boost.window, boost_limit=settings.boost.limit,
    )
    cards = EntityCardStore(store.connection, settings.embedding_dim, ef_search=settings.ef_search,
                            bm25_k1=settings.bm25.k1, bm25_b=settings.bm25.b)
    return PgBackends(PgBackend(store, channels), PgEntityBackend(cards), store)
