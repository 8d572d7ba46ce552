"""Query understanding for one search: the expander's keywords, question
type and embedding; optional expansion terms from what is stored (L1/L2/L3);
an optional HyDE passage embedding. Each degrades on its own: without the
expander the shared tokenizer gives the keywords and the vector channels
are skipped."""
from __future__ import annotations

from dataclasses import dataclass, field

from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.common import text as textutil
from services.gateway.downstream.interfaces import Expander, Retriever
from services.gateway.downstream.guard import Deadline, Trace, guarded

UNSPECIFIED_TYPE = "QUESTION_TYPE_UNSPECIFIED"


@dataclass
class Understanding:
    """What the expander made of a query.

    Attributes:
        info: the QueryInfo reported back to the caller.
        keywords: keyword terms for keyword search (expansions included).
        embedding: query embedding; empty without the expander.
        question_type: QuestionType enum name.
        confidence: confidence of the question type in [0, 1].
        translation: the query's words in the other writing system
            (ExpandResponse.translation); empty without the expander.
        script_centroids: {writing system: mean chunk embedding} of the
            collections searched, from retriever_pg's reply when they mix
            two systems (RetrieveResponse.script_centroids); {} otherwise.
    """

    info: gateway_pb2.QueryInfo
    keywords: list[str] = field(default_factory=list)
    embedding: list[float] = field(default_factory=list)
    question_type: str = UNSPECIFIED_TYPE
    confidence: float = 0.0
    translation: types_pb2.QueryTranslation = field(default_factory=types_pb2.QueryTranslation)
    script_centroids: dict[str, list[float]] = field(default_factory=dict)


async def understand(expander: Expander, query: str, deadline: Deadline, trace: Trace, cap: float,
                     domain_packs: list[str] | None = None, embed: bool = True) -> Understanding:
    """Expands ``query`` (stage "expand"), its question classified with the
    ``domain_packs`` of the collections searched, with its embedding when
    ``embed`` (else ``embedding`` stays [] for ``embed_query`` to fill);
    without the expander, keywords from the shared tokenizer and no
    embedding (stage DEGRADED).

    Raises:
        DownstreamError: the expander found the query invalid.
    """
    request = expander_pb2.ExpandRequest(query=query, embed=embed, domain_packs=domain_packs or [])
    expanded = await guarded(trace, names.STAGE_EXPAND, "expander", lambda t: expander.expand(request, t), None,
                             deadline, cap)
    if expanded is None:
        keywords = textutil.query_keywords(query)
        return Understanding(gateway_pb2.QueryInfo(normalized_query=query, keywords=keywords), keywords)
    question_type = expanded.question_type_name or expander_pb2.QuestionType.Name(expanded.question_type)
    info = gateway_pb2.QueryInfo(
        normalized_query=expanded.normalized_query, keywords=expanded.keywords, question_type=question_type,
        query_cut=expanded.query_cut, embedding_model=expanded.embedding_model, translation=expanded.translation)
    return Understanding(info, list(expanded.keywords), list(expanded.embedding), question_type,
                         expanded.question_type_confidence, expanded.translation)


async def embed_query(expander: Expander, query: str, deadline: Deadline, trace: Trace, cap: float,
                      domain_packs: list[str] | None = None) -> expander_pb2.ExpandResponse | None:
    """The query's embedding alone (stage "embed"), asked while ``understand``
    (with ``embed=False``) analyses the same query, so that the channels
    that need no vector start without waiting for the model: the expander's
    own Expand with ``embed``, whose vector, model and query cut
    ``apply_embedding`` copies. None when the expander fails (stage
    DEGRADED).

    Raises:
        DownstreamError: the expander found the query invalid (not counted
            as the expander degraded: the caller's error, which
            ``understand`` reports for the same query).
    """
    request = expander_pb2.ExpandRequest(query=query, embed=True, domain_packs=domain_packs or [])
    return await guarded(trace, names.STAGE_EMBED, "expander", lambda t: expander.expand(request, t), None,
                         deadline, cap)


def apply_embedding(understanding: Understanding, embedded: expander_pb2.ExpandResponse | None) -> None:
    """Copies ``embed_query``'s vector, model name and query cut into
    ``understanding``; leaves it without a vector when ``embedded`` is None
    or carries none."""
    if embedded is None or not embedded.embedding:
        return
    understanding.embedding = list(embedded.embedding)
    understanding.info.embedding_model = embedded.embedding_model
    understanding.info.query_cut.CopyFrom(embedded.query_cut)


async def add_expansions(retriever: Retriever, understanding: Understanding, limit: int, deadline: Deadline,
                         trace: Trace, cap: float, collections: list[str] | None = None) -> None:
    """Adds the keywords of retriever_pg's expansion terms (L1 entity names,
    L2 entity definitions, L3 headings; MarxSphere expandQuery,
    the MarxSphere design (docs/references.md) section 5) to
    ``understanding.keywords`` and reports each term in ``info.expansions``
    as "text (origin: matched keyword)". Unchanged, with the stage
    DEGRADED, when the retriever fails."""
    keywords = understanding.keywords
    request = retriever_pb2.SuggestExpansionsRequest(keywords=keywords[:50], limit=limit, collections=collections or [])
    reply = await guarded(trace, names.STAGE_EXPANSION, retriever.name,
                          lambda t: retriever.suggest_expansions(request, t), None, deadline, cap)
    if reply is None:
        return
    for e in reply.expansions:
        understanding.info.expansions.append(f"{e.text} ({e.origin}: {e.matched})")
        keywords.extend(t for t in textutil.query_keywords(e.text) if t not in keywords)


async def hyde_embedding(expander: Expander, query: str, deadline: Deadline, trace: Trace, cap: float,
                         packs: list[str] | None = None) -> list[float]:
    """Embedding of a hypothetical answer passage written by the LLM (HyDE,
    MarxSphere V63 dual vector, the MarxSphere design (docs/references.md)
    section 3); [] and stage "hyde" SKIPPED without an LLM, DEGRADED when
    the expander fails."""
    request = expander_pb2.RewriteRequest(query=query, kind=expander_pb2.REWRITE_KIND_HYDE, max_results=1,
                                          domain_packs=packs or [])
    reply = await guarded(trace, names.STAGE_HYDE, "expander", lambda t: expander.rewrite(request, t), None,
                          deadline, cap, record_ok=False)
    if reply is None:
        return []
    if not reply.rewrites:
        trace.skip(names.STAGE_HYDE, reply.fallback_reason or "no LLM configured")
        return []
    embed = expander_pb2.EmbedRequest(texts=[reply.rewrites[0].text], kind=expander_pb2.EMBED_KIND_PASSAGE)
    embedded = await guarded(trace, names.STAGE_HYDE, "expander", lambda t: expander.embed(embed, t), None, deadline, cap)
    return list(embedded.vectors[0].values) if embedded is not None and embedded.vectors else []

