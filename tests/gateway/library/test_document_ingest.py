"""Document ingest's last stage, sentence vectors: after the chunks are
stored, their ``sentence.maxsim`` sentences are embedded passage-side so a
question finds them in the expander's cache, inline or (the default) in the
background once no ingest runs; the setting switches it off, unchanged
documents skip it, and an expander failure there loses nothing already
stored."""
from __future__ import annotations

import json

import grpc
import pytest

from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.gateway.downstream.guard import Deadline
from services.gateway.search.sentence_maxsim import sentence_units
from tests.fakes import FakeExpander, FakeRetriever
from tests.gateway.test_orchestration import mesh, stages

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]

INLINE = {"sentence_vectors_mode": "inline"}
TEXTS = {"a": "第一条 用人单位应当按时支付工资。劳动者有权拒绝违章指挥。", "b": "第二条 本法自公布之日起施行。"}


def payload() -> bytes:
    return "\n".join(json.dumps({"id": i, "title": "测试法", "text": t}, ensure_ascii=False) for i, t in TEXTS.items()).encode()


def embeds(expander: FakeExpander) -> list[list[str]]:
    return [list(r.texts) for rpc, r in expander.calls if rpc == "embed"]


class FailingSecondEmbed(FakeExpander):
    """Embeds the chunks, then fails: the sentence call is the second."""

    async def embed(self, request, timeout):
        if embeds(self):
            self.fail = grpc.StatusCode.UNAVAILABLE
        return await super().embed(request, timeout)


class Unchanged(FakeRetriever):
    """Reports the hash of whatever it last stored, so a second ingest of
    the same payload is unchanged."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.hashes: dict[str, str] = {}

    async def ingest_documents(self, request, timeout):
        self.hashes.update({d.document.id: d.content_hash for d in request.documents})
        return await super().ingest_documents(request, timeout)

    async def get_document_hashes(self, request, timeout):
        return await self._answer("get_document_hashes", request,
                                  retriever_pb2.GetDocumentHashesResponse(content_hashes=self.hashes))


async def test_the_stored_chunks_sentences_are_embedded_passage_side_after_the_store():
    expander, pg = FakeExpander(), FakeRetriever("retriever_pg")
    reply, _ = await mesh(expander=expander, pg=pg, ingest=INLINE).documents.ingest(payload(), Deadline(10))
    chunk_call, sentence_call = [r for rpc, r in expander.calls if rpc == "embed"]
    stored_chunks = [c for d in next(r for rpc, r in pg.calls if rpc == "ingest_documents").documents for c in d.chunks]
    expected = [s for c in stored_chunks for s in sentence_units(c.text)]
    assert list(sentence_call.texts) == expected and len(expected) == 3
    assert sentence_call.kind == chunk_call.kind == expander_pb2.EMBED_KIND_PASSAGE
    stage = stages(reply)["sentence_vectors"]
    assert stage.status == types_pb2.STAGE_STATUS_OK and stage.detail == "3 sentences, 0 already cached"
    assert [t.stage for t in reply.timings][-2:] == ["store", "sentence_vectors"]


async def test_switched_off_only_the_chunks_are_embedded():
    expander = FakeExpander()
    reply, _ = await mesh(expander=expander, ingest={"sentence_vectors": False}).documents.ingest(payload(), Deadline(10))
    assert len(embeds(expander)) == 1 and "sentence_vectors" not in stages(reply)
    assert reply.stored == 2


async def test_unchanged_documents_embed_nothing_again():
    expander = FakeExpander()
    use = mesh(expander=expander, pg=Unchanged("retriever_pg"), graph=Unchanged("retriever_graph"), ingest=INLINE)
    await use.documents.ingest(payload(), Deadline(10))
    again, _ = await use.documents.ingest(payload(), Deadline(10))
    assert (again.unchanged, again.stored) == (2, 0) and len(embeds(expander)) == 2


async def test_an_expander_failure_on_the_sentences_keeps_the_stored_documents():
    expander, pg = FailingSecondEmbed(), FakeRetriever("retriever_pg")
    reply, _ = await mesh(expander=expander, pg=pg, ingest=INLINE).documents.ingest(payload(), Deadline(10))
    assert reply.stored == 2 and not reply.failures and pg.stored == ["a", "b"]
    stage = stages(reply)["sentence_vectors"]
    assert stage.status == types_pb2.STAGE_STATUS_DEGRADED and "sentences not embedded ahead" in stage.detail


async def test_by_default_the_sentences_are_embedded_in_the_background_after_the_call():
    expander, pg = FakeExpander(), FakeRetriever("retriever_pg")
    use = mesh(expander=expander, pg=pg, ingest={"sentence_vectors_idle_seconds": 0.05})
    try:
        reply, _ = await use.documents.ingest(payload(), Deadline(10))
        assert len(embeds(expander)) == 1  # the chunks only, before the call returned
        assert stages(reply)["sentence_vectors"].detail == "3 sentences queued for the background (3 waiting)"
        assert await use.documents.backfill.drained(5)
        stored_chunks = [c for d in next(r for rpc, r in pg.calls if rpc == "ingest_documents").documents for c in d.chunks]
        assert embeds(expander)[1] == [s for c in stored_chunks for s in sentence_units(c.text)]
        assert [r.kind for rpc, r in expander.calls if rpc == "embed"][1] == expander_pb2.EMBED_KIND_PASSAGE
    finally:
        await use.documents.shut_down()


async def test_in_the_background_unchanged_documents_queue_their_sentences_again():
    # A worker stopped before it was done left some sentences unembedded; the
    # expander's cache answers the others without running the model.
    expander = FakeExpander()
    use = mesh(expander=expander, pg=Unchanged("retriever_pg"), graph=Unchanged("retriever_graph"),
               ingest={"sentence_vectors_idle_seconds": 0.05})
    try:
        await use.documents.ingest(payload(), Deadline(10))
        assert await use.documents.backfill.drained(5)
        again, _ = await use.documents.ingest(payload(), Deadline(10))
        assert (again.unchanged, again.stored) == (2, 0)
        assert await use.documents.backfill.drained(5)
        chunks, first, second = embeds(expander)
        assert first == second and len(first) == 3
    finally:
        await use.documents.shut_down()


async def test_an_ingest_that_stores_nothing_creates_no_collection_and_one_that_stores_does():
    """A fresh user's failed ingest (an empty file) left a collection that List and Search took for real."""
    m = mesh(pg=FakeRetriever("retriever_pg"), ingest=INLINE)
    reply, failures = await m.documents.ingest(b"not json\n", Deadline(10), collection="ghost")
    assert reply.stored == 0 and failures
    assert await m.documents.packs.not_stored(["ghost"], Deadline(5)) == ["ghost"]
    reply, _ = await m.documents.ingest(payload(), Deadline(10), collection="made")
    assert reply.stored == 2
    assert await m.documents.packs.not_stored(["made"], Deadline(5)) == []  # known before the stores list it

