"""Small fakes of the gateway's client interfaces (services.gateway.downstream.interfaces),
for unit tests of the orchestration. Each fake answers from what it was
given, or fails the way it was told: ``fail`` is a grpc.StatusCode (raised
as DownstreamError, with a BadRequest for INVALID_ARGUMENT) or "hang"
(never answers)."""
from __future__ import annotations

import asyncio

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from graphmesh.common.v1 import entity_pb2, types_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.fuser.v1 import fuser_pb2
from graphmesh.reranker.v1 import reranker_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common.errors import DownstreamError
from services.common.llm import LlmError


def downstream_error(service: str, code: grpc.StatusCode, field: str = "query") -> DownstreamError:
    """The DownstreamError a gRPC adapter raises for ``code``; an
    INVALID_ARGUMENT carries a BadRequest naming ``field``, as our services
    send it."""
    status = None
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.BadRequest(field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=field, description="is wrong")]))
        status = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=f"{field}: is wrong", details=[detail])
    return DownstreamError(service, code, f"{code.name.lower()} in fake", status)


class _Fake:
    def __init__(self, name: str, fail: grpc.StatusCode | str | None = None) -> None:
        self.name = name
        self.fail = fail
        self.calls: list[tuple[str, object]] = []

    async def _answer(self, rpc: str, request, reply):
        self.calls.append((rpc, request))
        if self.fail == "hang":
            await asyncio.Event().wait()
        if isinstance(self.fail, grpc.StatusCode):
            raise downstream_error(self.name, self.fail)
        return reply


def candidate(doc_id: str, text: str, channel: str, score: float, vector_score: float = 0.0) -> types_pb2.Candidate:
    """A one-chunk candidate found by ``channel`` (and by pg.vector with
    ``vector_score`` when given)."""
    scores = [types_pb2.ChannelScore(channel=channel, score=score, rank=1)]
    if vector_score:
        scores.append(types_pb2.ChannelScore(channel="pg.vector", score=vector_score, rank=1))
    return types_pb2.Candidate(id=f"{doc_id}#0", document_id=doc_id, title="测试法", heading_path=["测试法", "第一条"],
                               text=text, channel_scores=scores, source=types_pb2.SOURCE_DOCUMENT_CHUNK)


class FakeExpander(_Fake):
    def __init__(self, fail=None, keywords=("工资",), embedding=(0.1, 0.2), embedding_model="", translation=None) -> None:
        super().__init__("expander", fail)
        self.keywords = list(keywords)
        self.embedding = list(embedding)
        self.embedding_model = embedding_model
        self.translation = translation

    async def expand(self, request, timeout):
        return await self._answer("expand", request, expander_pb2.ExpandResponse(
            normalized_query=request.query, keywords=self.keywords, embedding=self.embedding if request.embed else [],
            embedding_model=self.embedding_model, translation=self.translation))

    async def embed(self, request, timeout):
        return await self._answer("embed", request, expander_pb2.EmbedResponse(
            vectors=[expander_pb2.Vector(values=self.embedding) for _ in request.texts], dimension=len(self.embedding)))

    async def rewrite(self, request, timeout):
        return await self._answer("rewrite", request, expander_pb2.RewriteResponse(fallback_reason="no LLM configured"))

    async def normalize_entity(self, request, timeout):
        return await self._answer("normalize_entity", request, expander_pb2.NormalizeEntityResponse(
            normalized_query=request.query, gate_reason="kept"))


class GatedExpander(FakeExpander):
    """Embeds only when the test lets it: one ``gate.release()`` per Embed
    call; ``arrived`` counts the calls made so far."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Semaphore(0)
        self.arrived = 0

    async def embed(self, request, timeout):
        self.arrived += 1
        await self.gate.acquire()
        return await super().embed(request, timeout)

    def open(self, calls: int) -> None:
        """Lets ``calls`` more Embed calls through."""
        for _ in range(calls):
            self.gate.release()

    async def until_arrived(self, calls: int) -> None:
        for _ in range(1000):
            if self.arrived >= calls:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"Embed call {calls} never arrived")


class FakeRetriever(_Fake):
    """A retriever answering every Retrieve with ``candidates`` and every
    Related with ``related`` (UNIMPLEMENTED-like failure when None)."""

    def __init__(self, name: str, candidates=(), fail=None, entities=(), related=None, centroids=None) -> None:
        super().__init__(name, fail)
        self.candidates = list(candidates)
        self.centroids = dict(centroids or {})  # sent as RetrieveResponse.script_centroids
        self.entities = list(entities)
        self.related_candidates = None if related is None else list(related)
        self.stored: list = []

    async def retrieve(self, request, timeout):
        centroids = [retriever_pb2.ScriptCentroid(script=k, values=v) for k, v in self.centroids.items()]
        return await self._answer("retrieve", request, retriever_pb2.RetrieveResponse(candidates=self._asked(request),
                                                                                    script_centroids=centroids))

    def _asked(self, request) -> list[types_pb2.Candidate]:
        """``candidates`` with the scores of the channels the request runs,
        as a real retriever would: none of a switched-off channel, none of
        pg.vector / pg.hyde without its vector; a candidate left with no
        score is left out."""
        skipped = set(request.disabled_channels)
        if not request.query_embedding:
            skipped.add("pg.vector")
        if not request.hyde_embedding:
            skipped.add("pg.hyde")
        out = []
        for cand in self.candidates:
            scores = [s for s in cand.channel_scores if s.channel not in skipped]
            if scores:
                copy = types_pb2.Candidate()
                copy.CopyFrom(cand)
                del copy.channel_scores[:]
                copy.channel_scores.extend(scores)
                out.append(copy)
        return out

    async def ingest_documents(self, request, timeout):
        reply = await self._answer("ingest_documents", request, retriever_pb2.IngestDocumentsResponse(stored=len(request.documents)))
        self.stored.extend(d.document.id for d in request.documents)
        new = {d.document.id for d in request.documents}  # listed and deleted as a store would
        self.documents = [*(d for d in getattr(self, "documents", []) if d.id not in new),
                          *(types_pb2.StoredDocument(id=d.document.id, collection=d.document.collection, title=d.document.title,
                                                  source=d.document.source)
                            for d in request.documents)]
        return reply

    async def get_document_hashes(self, request, timeout):
        return await self._answer("get_document_hashes", request, retriever_pb2.GetDocumentHashesResponse())

    async def ingest_entities(self, request, timeout):
        return await self._answer("ingest_entities", request, retriever_pb2.IngestEntitiesResponse(stored=len(request.entities)))

    async def ingest_triples(self, request, timeout):
        return await self._answer("ingest_triples", request, retriever_pb2.IngestTriplesResponse(stored=len(request.triples)))

    async def retrieve_entities(self, request, timeout):
        return await self._answer("retrieve_entities", request, retriever_pb2.RetrieveEntitiesResponse(candidates=self.entities))

    async def suggest_expansions(self, request, timeout):
        return await self._answer("suggest_expansions", request, retriever_pb2.SuggestExpansionsResponse())

    async def related(self, request, timeout):
        if self.related_candidates is None:
            raise DownstreamError(self.name, grpc.StatusCode.UNIMPLEMENTED, "Related is not offered")
        return await self._answer("related", request, retriever_pb2.RelatedResponse(candidates=self.related_candidates))

    async def list_documents(self, request, timeout):
        """The documents it was given (``documents``), by id, after after_id."""
        docs = sorted((d for d in getattr(self, "documents", []) if d.id > request.after_id
                       and (not request.ids or d.id in request.ids)
                       and (not request.collections or d.collection in request.collections)), key=lambda d: d.id)
        return await self._answer("list_documents", request, retriever_pb2.ListDocumentsResponse(
            documents=docs[: request.page_size or 100]))

    async def delete_documents(self, request, timeout):
        gone = sorted(request.ids)
        if hasattr(self, "documents"):
            self.documents = [d for d in self.documents if d.id not in set(gone)]
        return await self._answer("delete_documents", request, retriever_pb2.DeleteDocumentsResponse(
            deleted=types_pb2.DeletionCounts(documents=len(gone), chunks=2 * len(gone)), document_ids=gone))

    async def list_collections(self, request, timeout):
        """The collections it was given (``collections``), else those of
        its ``documents``. Not logged in ``calls`` (the gateway reads
        collections' packs beside every call it makes); counted in
        ``listings``."""
        self.listings = getattr(self, "listings", 0) + 1
        if self.fail == "hang":
            await asyncio.Event().wait()
        if isinstance(self.fail, grpc.StatusCode):
            raise downstream_error(self.name, self.fail)
        given = getattr(self, "collections", None)
        if given is None:
            names = dict.fromkeys(d.collection for d in getattr(self, "documents", []) if d.collection)
            given = [types_pb2.CollectionInfo(name=n) for n in names]
        return retriever_pb2.ListCollectionsResponse(collections=list(given))

    async def delete_collection(self, request, timeout):
        return await self._answer("delete_collection", request, retriever_pb2.DeleteCollectionResponse(
            deleted=types_pb2.DeletionCounts(documents=1)))

    async def export_entities(self, request, timeout):
        """The library entities it was given (``library``): the named ones, or a page after after_name."""
        library = sorted(getattr(self, "library", []), key=lambda e: e.name)
        found = [e for e in library if e.name in request.names] if request.names else \
            [e for e in library if e.name > request.after_name][: request.page_size or 1000]
        return await self._answer("export_entities", request, retriever_pb2.ExportEntitiesResponse(entities=found))

    async def delete_entities(self, request, timeout):
        gone = sorted(set(request.names) & {e.name for e in getattr(self, "library", [])})
        return await self._answer("delete_entities", request, retriever_pb2.DeleteEntitiesResponse(
            deleted=types_pb2.DeletionCounts(entities=len(gone)), names=gone))

    async def delete_triples(self, request, timeout):
        return await self._answer("delete_triples", request, retriever_pb2.DeleteTriplesResponse(deleted=0))


class FakeReranker(_Fake):
    """Scores a passage by its length (longer is better)."""

    def __init__(self, fail=None) -> None:
        super().__init__("reranker", fail)

    async def rerank(self, request, timeout):
        scores = [reranker_pb2.PassageScore(id=p.id, score=float(len(p.text))) for p in request.passages]
        return await self._answer("rerank", request, reranker_pb2.RerankResponse(scores=scores))


class FakeFuser(_Fake):
    """Keeps the candidates in arrival order and packs each as "[n] text"."""

    def __init__(self, fail=None) -> None:
        super().__init__("fuser", fail)

    async def fuse(self, request, timeout):
        seen: dict[str, types_pb2.Candidate] = {}
        for lst in request.lists:
            for cand in lst.candidates:
                seen.setdefault(cand.id, cand)
        ranked = list(seen.values())[: request.top_k or 10]
        text = "\n\n".join(f"[{n}] {c.title}\n{c.text}" for n, c in enumerate(ranked, start=1))
        section = fuser_pb2.ContextSection(source=types_pb2.SOURCE_DOCUMENT_CHUNK, candidate_ids=[c.id for c in ranked])
        return await self._answer("fuse", request, fuser_pb2.FuseResponse(
            candidates=ranked, context=fuser_pb2.PackedContext(text=text, sections=[section])))

    async def rank_entities(self, request, timeout):
        return await self._answer("rank_entities", request, fuser_pb2.RankEntitiesResponse(
            entities=list(request.candidates)[: request.top_k or 10]))


class FakeLlm:
    """An LLM endpoint: off (``enabled`` False), answering ``answer``, or
    failing with ``fail_reason``; ``requests`` keeps (messages, extra) of
    each call."""

    def __init__(self, enabled: bool = False, answer: str = "", fail_reason: str = "") -> None:
        self.enabled = enabled
        self.answer = answer
        self.fail_reason = fail_reason
        self.requests: list[tuple[list[dict[str, str]], dict | None]] = []

    async def complete(self, messages, max_tokens, timeout=None, purpose="answer", extra=None):
        self.requests.append((messages, extra))
        if self.fail_reason:
            raise LlmError(self.fail_reason, "fake failure")
        return self.answer

    async def stream(self, messages, max_tokens, timeout=None, purpose="answer", extra=None):
        self.requests.append((messages, extra))
        if self.fail_reason:
            raise LlmError(self.fail_reason, "fake failure")
        for piece in (self.answer[: len(self.answer) // 2], self.answer[len(self.answer) // 2 :]):
            yield piece


def entity(name: str, channel: str = "graph.exact") -> entity_pb2.EntityCandidate:
    """A library entity found by ``channel``."""
    return entity_pb2.EntityCandidate(name=name, category="蔬菜", evidence=[entity_pb2.EntityEvidence(channel=channel, score=1.0)])
