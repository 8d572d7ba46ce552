"""Sentence MaxSim: the pure scoring, and the stage in the search pipeline
over fakes of our client interfaces (which sentences are embedded, what the
fuser receives, how it degrades)."""
from __future__ import annotations

import grpc
import pytest

from graphmesh.common.v1 import types_pb2
from services.common import names
from services.gateway.downstream.guard import Deadline
from services.gateway.search.sentence_maxsim import MAX_SENTENCES_PER_CHUNK, chunk_units, maxsim_scores, sentence_units
from tests.fakes import FakeExpander, FakeFuser, FakeRetriever, candidate
from tests.gateway.test_orchestration import mesh, stages

pytestmark = pytest.mark.unit
ON_LOOP = pytest.mark.asyncio(loop_scope="session")
OK, SKIPPED, DEGRADED = types_pb2.STAGE_STATUS_OK, types_pb2.STAGE_STATUS_SKIPPED, types_pb2.STAGE_STATUS_DEGRADED


def test_sentence_units_skip_fragments_keep_reading_order_and_fall_back_to_the_whole_text():
    assert sentence_units("一、\n增长率低于阈值时停止。否则继续检索下一轮。") == ["增长率低于阈值时停止。", "否则继续检索下一轮。"]
    assert sentence_units("  短  ") == ["短"]
    assert sentence_units("   ") == []
    many = "".join(f"第{i}句话在这里。" for i in range(MAX_SENTENCES_PER_CHUNK + 5))
    assert len(sentence_units(many)) == MAX_SENTENCES_PER_CHUNK


def test_a_chunk_is_also_scored_by_the_question_its_heading_asks():
    # an FAQ's answer seldom repeats its question: "A: To staging, yes." under "Q: Can I deploy on Friday?"
    answer = "A: To staging, yes. To production, only emergency changes."
    assert chunk_units(answer, ["Deployment FAQ", "Q: Can I deploy on Friday?"]) == ["Q: Can I deploy on Friday?", answer]
    assert chunk_units("付款后七天内可以退货。", ["售后", "可以退货吗？"])[0] == "可以退货吗？"
    # a heading that asks nothing (a law's chapter, a section title) is not a unit
    assert chunk_units("用人单位应当依法支付经济补偿。", ["劳动合同法", "第四章 劳动合同的解除和终止"]) == ["用人单位应当依法支付经济补偿。"]
    assert chunk_units("Q: Can I deploy on Friday?", ["Q: Can I deploy on Friday?"]) == ["Q: Can I deploy on Friday?"]


def test_maxsim_is_the_best_sentence_of_each_chunk():
    scores = maxsim_scores([1.0, 0.0], ["a", "a", "b"], [[0.2, 0.9], [0.8, 0.1], [0.5, 0.5]])
    assert scores == {"a": pytest.approx(0.8), "b": pytest.approx(0.5)}
    assert maxsim_scores([1.0, 0.0], [], []) == {}
    with pytest.raises(ValueError):
        maxsim_scores([1.0, 0.0], ["a"], [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError):
        maxsim_scores([1.0, 0.0], ["a"], [[1.0, 0.0, 0.0]])


def test_maxsim_over_two_writing_systems_centres_each_sentence_by_its_systems_centroid():
    owners, vectors = ["zh", "en"], [[0.95, 0.31], [0.3, 0.95]]
    centroids = {"cjk": [0.99, 0.1], "latin": [0.1, 0.99]}
    plain = maxsim_scores([0.9, 0.3], owners, vectors)
    centred = maxsim_scores([0.9, 0.3], owners, vectors, ["cjk", "latin"], centroids)
    assert plain["zh"] > plain["en"] and centred["en"] > centred["zh"]
    # one writing system, or no centroids: plain cosines
    assert maxsim_scores([0.9, 0.3], owners, vectors, ["cjk", "cjk"], centroids) == plain
    assert maxsim_scores([0.9, 0.3], owners, vectors, ["cjk", "latin"], None) == plain


class SentenceExpander(FakeExpander):
    """Embeds the query as (1, 0) and a passage as (1, 0) when it holds
    ``answer``, else (0, 1)."""

    def __init__(self, answer: str, **kw) -> None:
        super().__init__(embedding=(1.0, 0.0), **kw)
        self.answer = answer

    async def embed(self, request, timeout):
        from graphmesh.expander.v1 import expander_pb2

        vectors = [expander_pb2.Vector(values=[1.0, 0.0] if self.answer in t else [0.0, 1.0]) for t in request.texts]
        return await self._answer("embed", request, expander_pb2.EmbedResponse(vectors=vectors, dimension=2))


def _chunks():
    chunks = [candidate("1", "第一条 总则。本法适用于全国。", "pg.keyword", 9.0),
              candidate("2", "第二条 无关的句子。增长率低于阈值时停止迭代。", "pg.keyword", 8.0)]
    for c in chunks:
        c.collection = "hr"
        c.metadata["status"] = "现行有效"
    return chunks


class StrippingFuser(FakeFuser):
    """Answers as the real fuser does: candidates without collection and metadata."""

    async def fuse(self, request, timeout):
        reply = await super().fuse(request, timeout)
        for c in reply.candidates:
            c.ClearField("collection")
            c.ClearField("metadata")
        return reply


def _maxsim_list(fuser: FakeFuser):
    """The sentence.maxsim list of the final Fuse request."""
    final = [r for rpc, r in fuser.calls if rpc == "fuse"][-1]
    return [lst for lst in final.lists if lst.candidates and lst.candidates[0].channel_scores[0].channel == names.SENTENCE_MAXSIM]


@ON_LOOP
async def test_each_sentence_of_the_fused_top_chunks_is_embedded_and_the_best_one_scores_its_chunk():
    expander, fuser = SentenceExpander("增长率"), StrippingFuser()
    pg = FakeRetriever("retriever_pg", _chunks())
    reply = (await mesh(expander=expander, pg=pg, fuser=fuser).search.search("增长率多少时停止？", 5, None, Deadline(5))).response
    embedded = [r for rpc, r in expander.calls if rpc == "embed"]
    assert len(embedded) == 1
    assert list(embedded[0].texts)[:2] == ["第一条 总则。", "本法适用于全国。"]
    assert "增长率低于阈值时停止迭代。" in embedded[0].texts
    [maxsim] = _maxsim_list(fuser)
    by_id = {c.id: c.channel_scores[0] for c in maxsim.candidates}
    assert by_id["2#0"].score == pytest.approx(1.0) and by_id["2#0"].rank == 1
    assert by_id["1#0"].score == pytest.approx(0.0) and by_id["1#0"].rank == 2
    assert maxsim.candidates[0].source == types_pb2.SOURCE_DOCUMENT_CHUNK  # quotas keep the chunk's source
    # the results keep what only the retrievers' candidates carry (the fuser drops it)
    assert {(c.collection, c.metadata["status"]) for c in reply.results if c.document_id in ("1", "2")} == {("hr", "现行有效")}
    assert stages(reply)[names.SENTENCE_MAXSIM].status == OK


@ON_LOOP
async def test_an_faq_answer_scores_by_the_question_its_heading_asks():
    # the answer's text shares nothing with the question; its heading is the question
    faq = candidate("1", "A: To staging, yes. To production, only emergency changes.", "pg.keyword", 9.0)
    faq.heading_path[:] = ["Deployment FAQ", "Q: Can I deploy on Friday?"]
    other = candidate("2", "Releases happen on Tuesdays and Thursdays.", "pg.keyword", 8.0)
    expander, fuser = SentenceExpander("deploy on Friday"), StrippingFuser()
    await mesh(expander=expander, pg=FakeRetriever("retriever_pg", [faq, other]), fuser=fuser).search.search(
        "Can I deploy on Friday?", 5, None, Deadline(5))
    [maxsim] = _maxsim_list(fuser)
    assert maxsim.candidates[0].id == "1#0" and maxsim.candidates[0].channel_scores[0].score == pytest.approx(1.0)


@ON_LOOP
async def test_switched_off_sentence_maxsim_embeds_nothing_and_sends_no_list():
    expander, fuser = SentenceExpander("增长率"), FakeFuser()
    pg = FakeRetriever("retriever_pg", _chunks())
    await mesh(expander=expander, pg=pg, fuser=fuser).search.search(
        "增长率多少时停止？", 5, None, Deadline(5), disabled=frozenset({names.SENTENCE_MAXSIM}))
    assert not [r for rpc, r in expander.calls if rpc == "embed"]
    assert _maxsim_list(fuser) == []


@ON_LOOP
async def test_a_failing_embed_degrades_the_stage_and_the_search_still_answers():
    class FailingEmbed(SentenceExpander):
        async def embed(self, request, timeout):
            self.fail = grpc.StatusCode.UNAVAILABLE
            try:
                return await super().embed(request, timeout)
            finally:
                self.fail = None

    fuser = FakeFuser()
    reply = (await mesh(expander=FailingEmbed("增长率"), pg=FakeRetriever("retriever_pg", _chunks()), fuser=fuser)
             .search.search("增长率多少时停止？", 5, None, Deadline(5))).response
    assert [c.document_id for c in reply.results][:2] == ["1", "2"]
    assert stages(reply)[names.SENTENCE_MAXSIM].status == DEGRADED and "expander" in reply.degraded
    assert _maxsim_list(fuser) == []


@ON_LOOP
async def test_without_a_query_embedding_the_stage_is_skipped():
    class NoVector(SentenceExpander):
        async def expand(self, request, timeout):
            reply = await super().expand(request, timeout)
            reply.ClearField("embedding")
            return reply

    reply = (await mesh(expander=NoVector("增长率"), pg=FakeRetriever("retriever_pg", _chunks()))
             .search.search("增长率多少时停止？", 5, None, Deadline(5))).response
    assert stages(reply)[names.SENTENCE_MAXSIM].status == SKIPPED


class LimitedExpander(SentenceExpander):
    """Refuses an Embed call of more than ``limit`` texts, as the real
    expander refuses more than its max_batch (INVALID_ARGUMENT)."""

    def __init__(self, answer: str, limit: int) -> None:
        super().__init__(answer)
        self.limit = limit

    async def embed(self, request, timeout):
        if len(request.texts) > self.limit:
            from tests.fakes import downstream_error
            raise downstream_error("expander", grpc.StatusCode.INVALID_ARGUMENT, "texts")
        return await super().embed(request, timeout)


def _long_chunks(n: int = 20, sentences: int = 30):
    return [candidate(str(i), "".join(f"第{i}块第{j}句话在这里。" for j in range(sentences)) + ("增长率低于阈值时停止。" if i == 7 else ""),
                      "pg.keyword", 20.0 - i) for i in range(n)]


@ON_LOOP
async def test_the_sentences_of_long_chunks_are_embedded_in_batches_the_expander_accepts():
    expander, fuser = LimitedExpander("增长率", limit=100), FakeFuser()
    reply = (await mesh(expander=expander, pg=FakeRetriever("retriever_pg", _long_chunks()), fuser=fuser,
                        ingest={"embed_batch": 100}).search.search("增长率多少时停止？", 5, None, Deadline(5))).response
    calls = [r for rpc, r in expander.calls if rpc == "embed"]
    assert len(calls) > 1 and all(len(c.texts) <= 100 for c in calls)
    assert sum(len(c.texts) for c in calls) > 512  # more than the real expander takes in one call
    [maxsim] = _maxsim_list(fuser)
    assert maxsim.candidates[0].id == "7#0" and maxsim.candidates[0].channel_scores[0].score == pytest.approx(1.0)
    assert stages(reply)[names.SENTENCE_MAXSIM].status == OK


@ON_LOOP
async def test_an_expander_refusing_the_stages_own_request_degrades_it_instead_of_failing_the_search():
    reply = (await mesh(expander=LimitedExpander("增长率", limit=10), pg=FakeRetriever("retriever_pg", _long_chunks()),
                        ingest={"embed_batch": 512}).search.search("增长率多少时停止？", 5, None, Deadline(5))).response
    assert reply.results
    assert stages(reply)[names.SENTENCE_MAXSIM].status == DEGRADED and "expander" in reply.degraded


def _maxsim_scores_sent(fuser: FakeFuser) -> dict[str, float]:
    [maxsim] = _maxsim_list(fuser)
    return {c.id: c.channel_scores[0].score for c in maxsim.candidates}


@ON_LOOP
async def test_a_second_search_over_the_same_chunks_takes_their_sentence_vectors_from_the_gateways_memory():
    expander, fuser = SentenceExpander("增长率"), FakeFuser()
    flow = mesh(expander=expander, pg=FakeRetriever("retriever_pg", _chunks()), fuser=fuser).search
    await flow.search("增长率多少时停止？", 5, None, Deadline(5))
    first = _maxsim_scores_sent(fuser)
    embedded = len([r for rpc, r in expander.calls if rpc == "embed"])
    reply = (await flow.search("增长率到多少时停止？", 5, None, Deadline(5))).response
    assert len([r for rpc, r in expander.calls if rpc == "embed"]) == embedded == 1
    assert _maxsim_scores_sent(fuser) == first and first["2#0"] == pytest.approx(1.0)
    assert stages(reply)[names.SENTENCE_MAXSIM].detail.endswith("5 sentences of 3 chunks, 5 cached (5 in the gateway's memory)")


@ON_LOOP
async def test_with_no_memory_for_sentence_vectors_every_search_asks_the_expander():
    expander = SentenceExpander("增长率")
    flow = mesh(expander=expander, pg=FakeRetriever("retriever_pg", _chunks()), sentence_cache_mb=0).search
    for _ in range(2):
        await flow.search("增长率多少时停止？", 5, None, Deadline(5))
    assert len([r for rpc, r in expander.calls if rpc == "embed"]) == 2


@ON_LOOP
async def test_the_writing_systems_centroids_retriever_pg_sends_centre_the_sentence_scores():
    """Chunks of two writing systems and the centroids retriever_pg sent with them: the English chunk's
    sentence (1, 0) scores its cosine to the query (1, 0) with the English centroid (0.5, 0.5) removed."""
    chunks = _chunks()
    chunks[0].script, chunks[1].script = "cjk", "latin"
    expander, fuser = SentenceExpander("增长率"), StrippingFuser()
    pg = FakeRetriever("retriever_pg", chunks, centroids={"cjk": [0.0, 1.0], "latin": [0.5, 0.5]})
    await mesh(expander=expander, pg=pg, fuser=fuser).search.search("增长率多少时停止？", 5, None, Deadline(5))
    [maxsim] = _maxsim_list(fuser)
    by_id = {c.id: c.channel_scores[0].score for c in maxsim.candidates}
    assert by_id["2#0"] == pytest.approx(0.5 ** 0.5, abs=1e-5) and by_id["1#0"] == pytest.approx(0.0)
