"""The document-graph channels of the graph retriever.

First stage (Retrieve, the query only; in-memory lookups, then one indexed
read of the hit chunks):

- the lookup channels of the searched collections' domain packs, read from
  the pack's in-memory tables (law_zh: ``graph.article``, the article a
  query names by law and number; ``graph.term``, the defining article of a
  term the query names or whose definition its words cover; ``graph.offence``,
  penal articles of the offences a case description names).

Second stage (Related, seeded by fused first-stage hits; indexed one-hop
reads):

- ``graph.cites``: articles a seed cites (CITES), is cited by, amends or is
  amended by (AMENDS). Score: seed weight x edge weight (out 1.0, in 0.7).
- ``graph.version``: other versions of a seed (VERSION_OF). Score: seed
  weight x text similarity (x 0.8 from a current seed to a historical one).
- ``graph.ppr``: personalised PageRank (``ppr``) over the neighbourhood of
  the seeds and of the query's terms (documents, Term nodes; CITES, AMENDS,
  VERSION_OF, DEFINES, MENTIONS edges), restarting at the query's terms
  (weight 1 each) and the seeds (``PASSAGE_NODE_WEIGHT`` x seed weight), as
  HippoRAG 2 does; documents ranked by their PPR mass.

Scope: every channel returns only chunks of documents in the request's
collections that meet its metadata conditions (``filter_cypher``), checked
in the one read of the hit chunks; when the store holds other collections
or conditions are given, each lookup asks for ``SCOPED_OVERFETCH`` times
``top_k`` first so the scope rarely leaves a channel short. Graph walks
(citations, versions, PageRank) may pass through documents outside the
scope; only their results are restricted.

Dense lookups: a pack's lookup table may match by meaning as well
(law_zh's offence names against penal articles). It lists the documents it
wants vectors of (``dense_documents``); with an ``EmbedClient`` the first
chunks of those are embedded passage-side through the expander after each
rebuild (``attach_vectors``), and a query's ``probes`` query-side before
the lookup, within half of the request's remaining deadline. Without the
expander the lookups match by characters, as they do until the vectors are
there; a failed attempt is retried ``DENSE_RETRY_SECONDS`` later, in the
background. Vectors of another model than the expander now runs are
dropped and embedded again.

Seed weight: the seed's score over the best seed's (rank-based 1/(1+rank)
when scores are not positive). The lookup tables (one per domain pack with
lookups, ``DomainPack.lookup_index``, for the packs of stored collections) are rebuilt
from Neo4j when the stored graph version changes, checked at most every
``refresh_seconds``.
"""
from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

import numpy as np
from neo4j import AsyncDriver, RoutingControl
from neo4j.exceptions import DriverError, Neo4jError

import domains

from services.common import names
from services.common.filters import DEFAULT_COLLECTION, Condition
from services.common.records import Hit
from services.common.embed_client import EmbedClient, EmbedUnavailable
from services.common.retriever import SeedRecord
from services.common.text import query_keywords
from domains.facts import ArticleEntry, IndexHit, TermEntry, term_key
from services.retriever_graph.doc_graph import META_ID
from services.retriever_graph.filter_cypher import scope_cypher
from services.retriever_graph.timeouts import bound, timed, translate_timeouts
from services.common.store_deadline import QueryBudget, StoreTimeout, deadline_scope, remaining

#: Set while ``load`` rebuilds the lookup tables (its reads have no ceiling).
_LOADING: contextvars.ContextVar[bool] = contextvars.ContextVar("graphmesh_docgraph_loading", default=False)
from services.retriever_graph.ppr import DAMPING, PASSAGE_NODE_WEIGHT, personalized_pagerank

log = logging.getLogger(__name__)

_VERSION = "MATCH (m:GraphMeta {id: $id}) RETURN m.version AS version, coalesce(m.facts_version, 0) AS facts_version"
_ARTICLES = """
MATCH (d:Document) WHERE d.law_key IS NOT NULL AND d.law_key <> ''
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk {ordinal: 0})
RETURN d.id AS id, d.law_key AS law, d.article_key AS article, d.status AS status, d.current AS current,
       d.offences AS offences, c.id AS chunk
"""
_TERMS = """
MATCH (d:Document)-[e:DEFINES]->(t:Term)
RETURN t.key AS key, t.name AS name, t.law AS law, t.definition AS definition, t.kind AS kind,
       collect([d.id, e.chunk_id, d.current]) AS definers
"""
_FIRST_TEXTS = """
UNWIND $ids AS id
MATCH (d:Document {id: id})-[:HAS_CHUNK]->(c:Chunk {ordinal: 0})
RETURN d.id AS id, c.text AS text
"""
_COLLECTIONS = "MATCH (d:Document) RETURN DISTINCT coalesce(d.collection, 'default') AS collection"
_PACKS = "MATCH (k:Collection) RETURN k.name AS name, k.domain_pack AS pack"
# SCOPE: the scope's boolean expression over d (filter_cypher.scope_cypher).
_CHUNKS = """
UNWIND $ids AS id
MATCH (d:Document)-[:HAS_CHUNK]->(c:Chunk {id: id})
WHERE SCOPE
RETURN c.id AS chunk_id, d.id AS document_id, d.title AS title, c.heading_path AS heading_path,
       c.text AS text, c.ordinal AS ordinal, coalesce(d.collection, 'default') AS collection,
       c.metadata AS chunk_metadata, d.metadata AS document_metadata
"""
_FIRST_CHUNKS = """
UNWIND $ids AS id
MATCH (d:Document {id: id})-[:HAS_CHUNK]->(c:Chunk {ordinal: 0})
WHERE SCOPE
RETURN d.id AS document_id, c.id AS chunk_id
"""
_CITES = """
UNWIND $seeds AS seed
MATCH (s:Document {id: seed})
CALL (s) {
  MATCH (s)-[e:CITES|AMENDS]->(t:Document) RETURN t, type(e) AS rel, 'out' AS dir LIMIT $per_seed
  UNION
  MATCH (s)<-[e:CITES|AMENDS]-(t:Document) RETURN t, type(e) AS rel, 'in' AS dir LIMIT $per_seed
}
RETURN seed, t.id AS target, rel, dir
"""
_VERSIONS = """
UNWIND $seeds AS seed
MATCH (s:Document {id: seed})-[e:VERSION_OF]-(t:Document)
RETURN seed, t.id AS target, e.similarity AS similarity, startNode(e) = s AS from_seed
"""
_DOC_NEIGHBOURS = """
UNWIND $ids AS id
MATCH (d:Document {id: id})
CALL (d) {
  MATCH (d)-[e:CITES|AMENDS|VERSION_OF]-(t:Document) RETURN t.id AS other, 'doc' AS kind LIMIT $cap
  UNION
  MATCH (d)-[e:DEFINES|MENTIONS]->(x:Term) RETURN x.key AS other, 'term' AS kind LIMIT $cap
}
RETURN id, other, kind
"""
_TERM_NEIGHBOURS = """
UNWIND $keys AS key
MATCH (x:Term {key: key})
CALL (x) {
  MATCH (x)<-[e:DEFINES|MENTIONS]-(d:Document)
  RETURN d.id AS doc, type(e) AS rel ORDER BY rel DESC, doc LIMIT $cap
}
RETURN key, doc, rel
"""

#: Weight of a CITES/AMENDS edge by direction from the seed.
EDGE_WEIGHT = {"out": 1.0, "in": 0.7}
#: A historical version reached from a current seed counts this much.
VERSION_BACK_WEIGHT = 0.8
#: Candidates asked of each lookup per wanted one when the scope may drop some.
SCOPED_OVERFETCH = 4
#: Seconds before a failed embedding of a lookup table's documents is tried again.
DENSE_RETRY_SECONDS = 30.0
#: A query's probes are embedded only with at least this much of its deadline left,
#: and within half of what is left (the lookup's own read needs the rest).
DENSE_MIN_SECONDS = 0.05


def seed_weights(seeds: list[SeedRecord]) -> dict[str, float]:
    """Weight in (0, 1] of each seed document: its score over the best
    seed's, or 1/(1+rank) when the scores are not all positive; the first
    occurrence of a document wins."""
    weights: dict[str, float] = {}
    top = max((s.score for s in seeds), default=0.0)
    positive = top > 0 and all(s.score > 0 for s in seeds)
    for rank, seed in enumerate(seeds):
        weight = seed.score / top if positive else 1.0 / (1 + rank)
        weights.setdefault(seed.document_id, weight)
    return weights


class DocChannels:
    """Runs the document-graph channels over Neo4j and the in-memory index.

    Args:
        driver / database: the open Neo4j driver.
        refresh_seconds: how often the stored graph version is checked.
        per_seed: CITES/AMENDS neighbours read per seed and direction.
        ppr_cap: neighbours read per node for the PPR subgraph.
        word_tokens: the tokenizer for definitions (query_keywords).
        budget: transaction timeouts of its reads (None: none).
        embed: the expander's vectors for dense lookups (module doc);
            None: lookups match by characters only.
    """

    def __init__(self, driver: AsyncDriver, database: str = "neo4j", *, refresh_seconds: float = 10.0,
                 per_seed: int = 20, ppr_cap: int = 30,
                 word_tokens: Callable[[str], list[str]] = query_keywords,
                 budget: QueryBudget | None = None, embed: EmbedClient | None = None) -> None:
        self.driver = driver
        self.budget = budget
        self.database = database
        self.refresh_seconds = refresh_seconds
        self.per_seed = per_seed
        self.ppr_cap = ppr_cap
        self.word_tokens = word_tokens
        #: Lookup tables by domain pack, for the packs of the stored
        #: collections that have any (DomainPack.lookup_index).
        self.indexes: dict[str, Any] = {}
        #: The stored graph version and facts version the view was built
        #: from (-1: never built).
        self.version = -1
        self.facts_version = -1
        #: Collections holding documents when the index was built.
        self.collections: frozenset[str] = frozenset()
        #: Domain pack of each recorded collection when the index was built.
        self.packs: dict[str, str] = {}
        self._checked = 0.0
        self._refreshing: asyncio.Task | None = None
        self.embed = embed
        self._dense_tried = -DENSE_RETRY_SECONDS
        self._attaching: asyncio.Task | None = None
        #: The embedding model each lookup table's vectors came from (by id of the table).
        self._vector_models: dict[int, str] = {}

    async def _query(self, query: str, **params: Any) -> list:
        """Records of a read bounded by ``self.budget`` (the RPC's remaining
        deadline, at most the read ceiling; the lookup-table rebuild of
        ``load`` by the deadline only). Raises StoreTimeout when Neo4j
        terminated it at that bound."""
        seconds = bound(self.budget, write=_LOADING.get())
        with translate_timeouts(seconds):
            result = await self.driver.execute_query(timed(query, seconds), parameters_=params,
                                                     routing_=RoutingControl.READ, database_=self.database)
        return result.records

    # -- the lookup tables ---------------------------------------------------

    async def load(self) -> dict[str, Any]:
        """Rebuilds the lookup tables from what Neo4j holds now: one per
        domain pack of a stored collection whose pack has lookups, rebuilt
        only when the stored facts changed (so writes to other packs'
        collections run none of its code); returns them by pack name."""
        token = _LOADING.set(True)  # not bounded by the read ceiling
        try:
            return await self._load()
        finally:
            _LOADING.reset(token)

    async def _load(self) -> dict[str, Any]:
        records = await self._query(_VERSION, id=META_ID)
        version = int(records[0]["version"]) if records else 0
        facts_version = int(records[0]["facts_version"]) if records else 0
        collections = frozenset(r["collection"] for r in await self._query(_COLLECTIONS))
        packs = {r["name"]: r["pack"] or domains.DEFAULT_PACK for r in await self._query(_PACKS)}
        builders = {name: pack.lookup_index for name in sorted(set(packs.values()))
                    if (pack := domains.PACKS.get(name)) is not None and pack.lookup_index is not None}
        if facts_version == self.facts_version and set(builders) == set(self.indexes):
            indexes = self.indexes
        else:
            indexes = await self._build(builders, version) if builders else {}
        self.indexes, self.collections, self.packs = indexes, collections, packs
        self.version, self.facts_version = version, facts_version
        self._checked = time.monotonic()
        if self._wanting_vectors():
            await self.attach_vectors()
        for name, index in indexes.items():
            log.info("document graph index (%s): version %d, sizes %s", name, version, index.size)
        return indexes

    async def _build(self, builders: dict[str, Callable[..., Any]], version: int) -> dict[str, Any]:
        articles, offences = [], []
        for r in await self._query(_ARTICLES):
            chunk = r["chunk"] or ""
            if r["article"]:
                articles.append(ArticleEntry(r["id"], r["law"], r["article"], r["status"] or "", bool(r["current"]), chunk))
            if r["offences"]:
                offences.append((r["id"], chunk, list(r["offences"])))
        terms = [TermEntry(r["name"], r["law"], r["definition"] or "", r["kind"] or "",
                           [(d, c, bool(cur)) for d, c, cur in r["definers"]], key=r["key"] or "")
                 for r in await self._query(_TERMS)]
        return {name: await asyncio.to_thread(build, articles, terms, offences, self.word_tokens, version)
                for name, build in builders.items()}

    def _wanting_vectors(self) -> list[Any]:
        """Lookup tables that want vectors and have none yet (none without
        an EmbedClient)."""
        if self.embed is None:
            return []
        return [index for index in self.indexes.values()
                if getattr(index, "dense_documents", None) and not index.vectors_attached]

    async def attach_vectors(self) -> bool:
        """Embeds (passage side, through the expander) the first chunk of
        every document the lookup tables list in ``dense_documents`` and
        attaches the vectors (a zero row where no text is stored). Returns
        whether every table that wants vectors has them; a failure (expander
        unreachable, a read timing out) is logged and leaves the tables
        matching by characters."""
        self._dense_tried = time.monotonic()
        try:
            for index in self._wanting_vectors():
                ids = list(index.dense_documents)
                texts = {r["id"]: r["text"] or "" for r in await self._query(_FIRST_TEXTS, ids=ids)}
                present = [i for i, doc in enumerate(ids) if texts.get(doc)]
                if not present:
                    log.warning("dense lookups: none of %d documents has a stored text; retry in %.0f s",
                                len(ids), DENSE_RETRY_SECONDS)
                    return False
                vectors = await self.embed.embed([texts[ids[i]] for i in present], query=False)
                matrix = np.zeros((len(ids), vectors.shape[1]), dtype=np.float32)
                matrix[present] = vectors
                index.attach_vectors(matrix)
                self._vector_models[id(index)] = self.embed.model
                log.info("document graph index: %d vectors attached (%s)", len(present), self.embed.model)
        except (EmbedUnavailable, StoreTimeout, Neo4jError, DriverError, ValueError) as exc:
            log.warning("dense lookups stay off until the expander embeds (retry in %.0f s): %s",
                        DENSE_RETRY_SECONDS, exc)
            return False
        return True

    def _maybe_attach(self) -> None:
        """Starts ``attach_vectors`` in the background when a table still
        wants vectors and the last try is ``DENSE_RETRY_SECONDS`` old."""
        if self._attaching is not None and not self._attaching.done():
            return
        if time.monotonic() - self._dense_tried < DENSE_RETRY_SECONDS or not self._wanting_vectors():
            return
        self._attaching = asyncio.create_task(self._attach_in_background())

    async def _attach_in_background(self) -> None:
        with deadline_scope(None):
            await self.attach_vectors()

    async def _probe_vectors(self, index: Any, channel: str, query: str) -> np.ndarray | None:
        """Query-side vectors of ``index.probes(channel, query)``; None when
        there are none or the expander failed (the lookup then matches by
        characters)."""
        probes = index.probes(channel, query) if self.embed is not None and hasattr(index, "probes") else []
        if not probes:
            return None
        left = remaining()
        if left is not None and left < DENSE_MIN_SECONDS:
            return None
        timeout = self.embed.timeout if left is None else min(self.embed.timeout, left / 2)
        try:
            vectors = await self.embed.embed(probes, query=True, timeout=timeout)
        except EmbedUnavailable as exc:
            log.warning("dense lookup of %s skipped: %s", channel, exc)
            return None
        if self.embed.model != self._vector_models.get(id(index)):
            # The expander now runs another model: drop the old vectors (re-embedded in the background).
            log.warning("dense lookups: the expander's model is now %s, not %s; re-embedding",
                        self.embed.model, self._vector_models.get(id(index)))
            index.attach_vectors(None)
            self._dense_tried = -DENSE_RETRY_SECONDS
            return None
        return vectors

    def maybe_refresh(self) -> None:
        """Starts a background rebuild when the stored version may have
        changed (at most every ``refresh_seconds``); lookups keep using the
        current tables meanwhile."""
        if time.monotonic() - self._checked < self.refresh_seconds:
            return
        if self._refreshing is not None and not self._refreshing.done():
            return
        self._checked = time.monotonic()
        self._refreshing = asyncio.create_task(self._refresh())

    async def _refresh(self) -> None:
        # A background task: not bounded by the deadline of the request
        # that started it (the task copied that request's context).
        try:
            with deadline_scope(None):
                records = await self._query(_VERSION, id=META_ID)
                version = int(records[0]["version"]) if records else 0
                if version != self.version:
                    await self.load()
        except Exception as exc:  # noqa: BLE001 - a failed refresh keeps the old tables
            log.warning("document graph index refresh failed: %s", exc)

    # -- first stage -----------------------------------------------------------

    def _fetch(self, top_k: int, collections: Collection[str], conditions: list[Condition]) -> int:
        """Candidates to ask of a lookup for ``top_k`` within the scope."""
        if not conditions and self.collections <= set(collections):
            return top_k
        return top_k * SCOPED_OVERFETCH

    async def retrieve(self, query: str, keywords: list[str], top_k: int, channels: Collection[str],
                       collections: Collection[str] = (DEFAULT_COLLECTION,),
                       conditions: Collection[Condition] = ()) -> list[Hit]:
        """Hits of the enabled first-stage channels (article, term, offence),
        each channel's best first, at most ``top_k`` per channel, all of
        documents in ``collections`` meeting ``conditions``. A lookup runs
        only when the domain pack of one of ``collections`` feeds its
        channel (``pack_channels``): a search of generic collections runs
        none of them."""
        self.maybe_refresh()
        self._maybe_attach()
        wanted = set(channels)
        conditions = list(conditions)
        fetch = self._fetch(top_k, collections, conditions)
        found: list[tuple[str, IndexHit]] = []
        for pack_name in sorted({self.packs.get(c, domains.DEFAULT_PACK) for c in collections}):
            index = self.indexes.get(pack_name)
            if index is None:
                continue
            own = domains.get_pack(pack_name).channels
            for channel in names.GRAPH_FIRST_STAGE:
                if channel in wanted and channel in own:
                    vectors = await self._probe_vectors(index, channel, query)
                    extra = {} if vectors is None else {"probe_vectors": vectors}
                    found += [(channel, h) for h in index.hits(channel, query, keywords, fetch, **extra)]
        if not found:
            return []
        return await self._hits(found, top_k, collections, conditions)

    def pack_channels(self, collections: Collection[str]) -> set[str]:
        """The lookup channels the domain packs of ``collections`` feed (a
        collection not recorded has the default pack)."""
        return {c for name in collections
                for c in domains.get_pack(self.packs.get(name, domains.DEFAULT_PACK)).channels}

    async def _hits(self, found: list[tuple[str, IndexHit]], top_k: int, collections: Collection[str],
                    conditions: list[Condition]) -> list[Hit]:
        """The chunks of ``found`` (in order) whose documents are in the
        scope, at most ``top_k`` per channel."""
        if not found:
            return []
        params: dict[str, Any] = {}
        scope = scope_cypher(list(collections), conditions, params)
        chunk_ids = sorted({h.chunk_id for _, h in found if h.chunk_id})
        missing = sorted({h.doc_id for _, h in found if not h.chunk_id})
        first = {r["document_id"]: r["chunk_id"]
                 for r in await self._query(_FIRST_CHUNKS.replace("SCOPE", scope), ids=missing, **params)} if missing else {}
        chunk_ids = sorted(set(chunk_ids) | set(first.values()))
        rows = {r["chunk_id"]: r for r in await self._query(_CHUNKS.replace("SCOPE", scope), ids=chunk_ids, **params)}
        hits = []
        per_channel: dict[str, int] = {}
        for channel, h in found:
            row = rows.get(h.chunk_id or first.get(h.doc_id, ""))
            if row is None or per_channel.get(channel, 0) >= top_k:
                continue
            per_channel[channel] = per_channel.get(channel, 0) + 1
            # collection and metadata as the store's own channels give them: without them a lookup's article of a
            # repealed law reached the answer with no status, and was cited with no caveat (a trial's 水污染防治法第95条)
            hits.append(Hit(chunk_id=row["chunk_id"], document_id=row["document_id"], title=row["title"] or "",
                            heading_path=list(row["heading_path"] or []), text=row["text"] or "",
                            ordinal=int(row["ordinal"] or 0), channel=channel, score=float(h.score), evidence=h.evidence,
                            collection=row["collection"],
                            metadata={**json.loads(row["document_metadata"] or "{}"),
                                      **json.loads(row["chunk_metadata"] or "{}")}))
        return hits

    # -- second stage ------------------------------------------------------------

    async def related(self, query: str, keywords: list[str], seeds: list[SeedRecord], top_k: int,
                      channels: Collection[str], collections: Collection[str] = (DEFAULT_COLLECTION,),
                      conditions: Collection[Condition] = ()) -> list[Hit]:
        """Hits of the enabled related channels (cites, version, ppr) for
        ``seeds``, at most ``top_k`` per channel, best first, all of
        documents in ``collections`` meeting ``conditions``."""
        self.maybe_refresh()
        fed = self.pack_channels(collections)
        channels = {c for c in channels if c == names.GRAPH_PPR or c in fed}  # PPR walks any graph
        weights = seed_weights(seeds)
        conditions = list(conditions)
        fetch = self._fetch(top_k, collections, conditions)
        tasks = []
        if names.GRAPH_CITES in channels:
            tasks.append(self._cites(weights, fetch))
        if names.GRAPH_VERSION in channels:
            tasks.append(self._versions(weights, fetch))
        if names.GRAPH_PPR in channels:
            tasks.append(self._ppr(query, keywords, weights, fetch))
        found = [f for part in await asyncio.gather(*tasks) for f in part]
        return await self._hits(found, top_k, collections, conditions)

    async def _cites(self, weights: dict[str, float], top_k: int) -> list[tuple[str, IndexHit]]:
        best: dict[str, IndexHit] = {}
        for r in await self._query(_CITES, seeds=list(weights), per_seed=self.per_seed):
            target = r["target"]
            if target in weights and weights[target] >= weights[r["seed"]]:
                continue  # already a better seed
            label = {("CITES", "out"): "cites", ("CITES", "in"): "cited-by",
                     ("AMENDS", "out"): "amends", ("AMENDS", "in"): "amended-by"}[(r["rel"], r["dir"])]
            score = weights[r["seed"]] * EDGE_WEIGHT[r["dir"]]
            if target not in best or score > best[target].score:
                best[target] = IndexHit(target, "", round(score, 4), f"{label}:{r['seed']}")
        return [(names.GRAPH_CITES, h) for h in sorted(best.values(), key=lambda h: (-h.score, h.doc_id))[:top_k]]

    async def _versions(self, weights: dict[str, float], top_k: int) -> list[tuple[str, IndexHit]]:
        best: dict[str, IndexHit] = {}
        for r in await self._query(_VERSIONS, seeds=list(weights)):
            target = r["target"]
            factor = 1.0 if r["from_seed"] else VERSION_BACK_WEIGHT
            score = weights[r["seed"]] * float(r["similarity"] or 0.0) * factor
            label = "current-of" if r["from_seed"] else "earlier-of"
            if score > 0 and (target not in best or score > best[target].score):
                best[target] = IndexHit(target, "", round(score, 4), f"{label}:{r['seed']}")
        return [(names.GRAPH_VERSION, h) for h in sorted(best.values(), key=lambda h: (-h.score, h.doc_id))[:top_k]]

    async def _ppr(self, query: str, keywords: list[str], weights: dict[str, float],
                   top_k: int) -> list[tuple[str, IndexHit]]:
        term_seeds: dict[str, float] = {}
        normalized = query
        for term in (t for index in self.indexes.values() for t in index.terms):
            if len(term.name) >= 2 and term.name in normalized:
                term_seeds[term.key or term_key(term.law, term.name)] = 1.0
        edges: list[tuple[str, str, float]] = []
        docs = list(weights)
        term_rows = await self._query(_TERM_NEIGHBOURS, keys=list(term_seeds), cap=self.ppr_cap) if term_seeds else []
        term_docs = []
        for r in term_rows:
            edges.append((f"t:{r['key']}", f"d:{r['doc']}", 1.0))
            term_docs.append(r["doc"])
        for r in await self._query(_DOC_NEIGHBOURS, ids=sorted(set(docs) | set(term_docs)), cap=self.ppr_cap):
            other = f"d:{r['other']}" if r["kind"] == "doc" else f"t:{r['other']}"
            edges.append((f"d:{r['id']}", other, 1.0))
        reset = {f"t:{k}": w for k, w in term_seeds.items()}
        for doc, w in weights.items():
            reset[f"d:{doc}"] = reset.get(f"d:{doc}", 0.0) + PASSAGE_NODE_WEIGHT * w
        scores = personalized_pagerank(edges, reset, damping=DAMPING)
        ranked = sorted(((n[2:], s) for n, s in scores.items() if n.startswith("d:")), key=lambda x: (-x[1], x[0]))[:top_k]
        top = ranked[0][1] if ranked else 1.0
        return [(names.GRAPH_PPR, IndexHit(doc, "", round(s / top, 4), "ppr")) for doc, s in ranked]
