"""The one registry of channel names and pipeline stage names.

A channel is one way a retriever finds candidates ("<store>.<method>"); its
name appears in ``ChannelScore.channel``, in retrieval profiles' channel
weights, in ``SearchRequest.disabled_stages`` and in eval ablations. A stage
is one step of a gateway request; its name appears in ``StageTiming.stage``
and in the ``graphmesh_stage_duration_seconds{stage}`` metric. Every service,
the CLI and the tests take the names from here; tests/common/test_names.py
checks that the protos' comments list them.
"""
from __future__ import annotations

# ---- document retrieval channels -----------------------------------------
PG_VECTOR = "pg.vector"          # HNSW cosine to the query embedding
PG_CENTRED = "pg.centred"        # cosine with each writing system's mean removed, collections mixing two only
PG_HYDE = "pg.hyde"              # HNSW cosine to a HyDE passage embedding
PG_ADAPTED = "pg.adapted"        # HNSW cosine to the query embedding mapped by the domain pack's query adapter
PG_KEYWORD = "pg.keyword"        # Okapi BM25 over jieba terms
PG_TRANSLATED = "pg.translated"  # BM25 over the query's dictionary translations, other-script documents only
PG_FULLTEXT = "pg.fulltext"      # keyword hit count, then chunk length
PG_TRIGRAM = "pg.trigram"        # pg_trgm similarity, short queries only
PG_BOOST = "pg.boost"            # same-document neighbours of keyword hits
GRAPH_HEADING = "graph.heading"  # chunks under a heading the query names
GRAPH_FULLTEXT = "graph.fulltext"  # Neo4j Lucene (cjk) full text over chunks
GRAPH_NEIGHBOUR = "graph.neighbour"  # reading-order neighbours of top hits
GRAPH_ARTICLE = "graph.article"  # the article a query names by law and number (exact)
GRAPH_TERM = "graph.term"        # defining article of a term the query names or describes
GRAPH_OFFENCE = "graph.offence"  # penal articles of the offences a case description names
GRAPH_CITES = "graph.cites"      # articles a first-stage hit cites, is cited by or amends (CITES/AMENDS)
GRAPH_VERSION = "graph.version"  # other versions of a first-stage hit (VERSION_OF)
GRAPH_PPR = "graph.ppr"          # personalised PageRank over passages, terms and citations
RERANK = "rerank"                # cross-encoder score (added by the fuser)
SENTENCE_MAXSIM = "sentence.maxsim"  # best sentence's cosine to the query (gateway; also its stage)

PG_CHANNELS = (PG_VECTOR, PG_CENTRED, PG_HYDE, PG_ADAPTED, PG_KEYWORD, PG_TRANSLATED, PG_FULLTEXT, PG_TRIGRAM, PG_BOOST)
#: Graph channels of the first stage (Retrieve): query text only.
GRAPH_FIRST_STAGE = (GRAPH_HEADING, GRAPH_FULLTEXT, GRAPH_NEIGHBOUR, GRAPH_ARTICLE, GRAPH_TERM, GRAPH_OFFENCE)
#: Graph channels of the second stage (Related): seeded by fused first-stage hits.
GRAPH_RELATED = (GRAPH_CITES, GRAPH_VERSION, GRAPH_PPR)
GRAPH_CHANNELS = (*GRAPH_FIRST_STAGE, *GRAPH_RELATED)
DOCUMENT_CHANNELS = (*PG_CHANNELS, *GRAPH_CHANNELS)

# ---- entity retrieval channels -------------------------------------------
ENTITY_EXACT = "graph.exact"
ENTITY_ALIAS = "graph.alias"
ENTITY_RESOLVED = "graph.resolved"
ENTITY_FULLTEXT = "graph.fulltext"  # same name as the document channel, other store
ENTITY_ATTRIBUTE = "graph.attribute"
ENTITY_CATEGORY = "graph.category"
ENTITY_EXPAND = "graph.expand"
ENTITY_CARD_KEYWORD = "pg.entity_keyword"
ENTITY_CARD_VECTOR = "pg.entity_vector"
EXPANDER_MATCH = "expander.match"

# ---- gateway stages --------------------------------------------------------
STAGE_EXPAND = "expand"
STAGE_EXPANSION = "expansion"
STAGE_HYDE = "hyde"
STAGE_RERANK = "rerank"
STAGE_RERANK_CANDIDATES = "rerank.candidates"  # the first fusion that picks what to rerank
STAGE_FUSE = "fuse"
STAGE_GENERATE = "generate"
STAGE_TOTAL = "total"
STAGE_NORMALIZE = "normalize"
STAGE_EMBED = "embed"
STAGE_RANK = "rank"
STAGE_PARSE = "parse"
STAGE_HASH_CHECK = "hash_check"
STAGE_STORE = "store"
STAGE_SENTENCE_VECTORS = "sentence_vectors"  # ingest: the MaxSim sentences embedded ahead of questions
STAGE_RELATED = "related"        # the second, seeded graph call after a first fusion
STAGE_PARENT_CONTEXT = "parent_context"  # top chunks packed with their parent section
STAGE_COLLECTIONS = "collections"  # SKIPPED when a searched collection is in no store
STAGE_FILTERS = "filters"  # SKIPPED when a search with filters found nothing: what filters test
#: Stages whose SKIPPED detail says why a search found nothing, for the user to act on.
SCOPE_NOTE_STAGES = (STAGE_COLLECTIONS, STAGE_FILTERS)
# SENTENCE_MAXSIM ("sentence.maxsim") is a stage of the gateway as well as a channel.


def retrieve_stage(retriever: str) -> str:
    """Stage of one retriever's Retrieve call: "retriever_pg" -> "retrieve.pg"."""
    return f"retrieve.{retriever.removeprefix('retriever_')}"


def retrieve_vector_stage(retriever: str) -> str:
    """Stage of a Retrieve call asking only the vector channels, sent once
    the query embedding is in (services.gateway.search.split_retrieval):
    "retriever_pg" -> "retrieve.pg.vector"."""
    return f"{retrieve_stage(retriever)}.vector"


def retrieve_entities_stage(retriever: str) -> str:
    """Stage of one retriever's RetrieveEntities call ("retrieve_entities.graph")."""
    return f"retrieve_entities.{retriever.removeprefix('retriever_')}"


def related_stage(retriever: str) -> str:
    """Stage of one retriever's Related call: "retriever_graph" -> "related.graph"."""
    return f"related.{retriever.removeprefix('retriever_')}"


def strategy_stage(strategy: str) -> str:
    """Stage event of one fallback-chain strategy ("strategy.fast_path")."""
    return f"strategy.{strategy}"


# ---- what a Search request may switch off ---------------------------------
#: Whole stages: "graph" (the graph retriever), "expansion" (L1/L2/L3 terms),
#: "mmr", "rerank", "related" (the second, seeded call), "parent_context"
#: (top chunks packed with their parent section), "sentence.maxsim" (chunks
#: scored by their best sentence); plus every document channel. Each may be switched off per request (SearchRequest.disabled_stages)
#: and, where the profile has it off, on (SearchRequest.enabled_stages).
SWITCHABLE_STAGES = frozenset({"graph", STAGE_EXPANSION, "mmr", STAGE_RERANK, STAGE_RELATED, STAGE_PARENT_CONTEXT,
                               SENTENCE_MAXSIM, *DOCUMENT_CHANNELS})
