"""The gateway's orchestration driven in-process with fake clients: what a
caller gets when a downstream service times out, refuses the request, is
down or fails. Each test asserts the response, ``degraded`` and the stage
statuses."""
from __future__ import annotations

import asyncio
import gc
import re

import grpc
import pytest

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2
from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.common.errors import DownstreamError
from services.common.settings import nested_update
from services.gateway.config import GatewaySettings
from services.gateway.downstream.guard import Deadline
from services.gateway.server import use_cases
from tests.fakes import (FakeExpander, FakeFuser, FakeLlm, FakeReranker, FakeRetriever, candidate, downstream_error,
                         entity)

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]
OK, SKIPPED, DEGRADED = types_pb2.STAGE_STATUS_OK, types_pb2.STAGE_STATUS_SKIPPED, types_pb2.STAGE_STATUS_DEGRADED
ARTICLE = "用人单位自用工之日起超过一个月不满一年未与劳动者订立书面劳动合同的，应当向劳动者每月支付二倍的工资。"


def settings(**overrides) -> GatewaySettings:
    return GatewaySettings(**nested_update(
        {"port": 0, "rest": {"port": -1}, "deadlines": {"retrieve": 0.3, "rerank": 0.3, "fuse": 0.3, "expand": 0.3}},
        overrides))


def mesh(expander=None, pg=None, graph=None, reranker=None, fuser=None, llm=None, llm_settings=None, **overrides):
    """The gateway's use cases over fakes (healthy unless given);
    ``llm_settings`` overrides the gateway's llm group."""
    if llm_settings:
        overrides["llm"] = llm_settings
    pg = pg or FakeRetriever("retriever_pg", [candidate("5689", ARTICLE, "pg.keyword", 9.0, vector_score=0.93)])
    # Both carry a vector cosine well above the abstention cut (e5onnx scale:
    # law evidence 0.89-0.95, unrelated text 0.75-0.87), so these
    # tests answer (test_answer_abstention.py covers abstaining).
    graph = graph or FakeRetriever("retriever_graph", [candidate("17", "第十七条 劳动合同应当具备以下条款。", "graph.article", 3.0,
                                                                 vector_score=0.92)])
    return use_cases(settings(**overrides), expander or FakeExpander(), [pg, graph], reranker or FakeReranker(),
                     fuser or FakeFuser(), llm or FakeLlm())


def stages(response) -> dict[str, types_pb2.StageTiming]:
    return {t.stage: t for t in response.timings}


async def test_healthy_search_reports_every_stage_ok_and_nothing_degraded():
    reply = (await mesh().search.search("工资", 5, None, Deadline(5))).response
    assert [c.document_id for c in reply.results] == ["5689", "17"]
    s = stages(reply)
    for name in ("expand", "retrieve.pg", "retrieve.graph", "fuse", "total"):
        assert s[name].status == OK, name
    assert s["rerank"].status == SKIPPED and not reply.degraded
    assert reply.context.startswith("[1] ")


async def test_retriever_that_times_out_is_degraded_and_the_other_answers():
    reply = (await mesh(graph=FakeRetriever("retriever_graph", fail="hang")).search.search("工资", 5, None, Deadline(5))).response
    assert [c.document_id for c in reply.results] == ["5689"]
    assert list(reply.degraded) == ["retriever_graph"]
    graph = stages(reply)["retrieve.graph"]
    assert graph.status == DEGRADED and "timed out" in graph.detail
    assert stages(reply)["retrieve.pg"].status == OK


class BuildingIndexRetriever(FakeRetriever):
    """retriever_graph answering with its lookups' candidates and its
    full-text stage DEGRADED: the chunk index is still being built."""

    async def retrieve(self, request, timeout):
        reply = await super().retrieve(request, timeout)
        reply.timings.add(stage="graph.retrieve", status=DEGRADED, detail="building the chunks' full-text index (40%)")
        reply.timings.add(stage="graph.lookup", status=OK)
        return reply


async def test_a_channel_the_retriever_could_not_run_is_shown_with_why():
    graph = BuildingIndexRetriever("retriever_graph", [candidate("17", "第十七条", "graph.article", 3.0, vector_score=0.92)])
    reply = (await mesh(graph=graph).search.search("工资", 5, None, Deadline(5))).response
    assert [c.document_id for c in reply.results] == ["5689", "17"]
    s = stages(reply)
    assert s["retrieve.graph"].status == OK and not reply.degraded
    assert (s["graph.retrieve"].status, s["graph.retrieve"].detail) == (DEGRADED, "building the chunks' full-text index (40%)")
    assert "graph.lookup" not in s  # the retriever's own OK stages stay its own


async def test_retriever_invalid_argument_reaches_the_caller_unchanged():
    use = mesh(pg=FakeRetriever("retriever_pg", fail=grpc.StatusCode.INVALID_ARGUMENT))
    with pytest.raises(DownstreamError) as err:
        await use.search.search("工资", 5, None, Deadline(5))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and err.value.service == "retriever_pg"


async def test_reranker_that_is_down_degrades_rerank_only():
    use = mesh(reranker=FakeReranker(fail=grpc.StatusCode.UNAVAILABLE))
    reply = (await use.search.search("工资", 5, True, Deadline(5))).response
    assert list(reply.degraded) == ["reranker"]
    rerank = stages(reply)["rerank"]
    assert rerank.status == DEGRADED and rerank.detail.startswith("UNAVAILABLE")
    assert [c.document_id for c in reply.results] == ["5689", "17"]


async def test_reranker_scores_reach_the_fuser_when_it_answers():
    fuser = FakeFuser()
    reply = (await mesh(fuser=fuser).search.search("工资", 5, True, Deadline(5))).response
    assert stages(reply)["rerank"].status == OK and not reply.degraded
    assert stages(reply)["rerank"].detail == "reranker: 2 scored, 0 cut"
    final_request = fuser.calls[-1][1]
    assert set(final_request.rerank_scores) == {"5689#0", "17#0"}


class ReversingFuser(FakeFuser):
    """Ranks the candidates in the reverse of their arrival order."""

    async def fuse(self, request, timeout):
        reversed_request = type(request)()
        reversed_request.CopyFrom(request)
        del reversed_request.lists[:]
        reversed_request.lists.extend(reversed(request.lists))
        return await super().fuse(reversed_request, timeout)


async def test_reranker_gets_the_fused_best_not_the_first_to_arrive():
    reranker = FakeReranker()
    await mesh(fuser=ReversingFuser(), reranker=reranker, rerank={"max_passages": 1}).search.search("工资", 5, True, Deadline(5))
    [(_, rerank_request)] = reranker.calls
    assert [p.id for p in rerank_request.passages] == ["17#0"]  # the fuser's first, the graph's candidate
    # the list-wise ltr scorer gets the same candidates with their channel
    # scores, and the query's keywords; embeddings stay behind
    assert [c.id for c in rerank_request.candidates] == ["17#0"] and rerank_request.candidates[0].channel_scores
    assert not rerank_request.candidates[0].embedding and "工资" in rerank_request.keywords


async def test_fuser_that_fails_gives_arrival_order_without_context():
    reply = (await mesh(fuser=FakeFuser(fail=grpc.StatusCode.INTERNAL)).search.search("工资", 5, None, Deadline(5))).response
    assert list(reply.degraded) == ["fuser"]
    assert stages(reply)["fuse"].status == DEGRADED
    assert [c.document_id for c in reply.results] == ["5689", "17"] and reply.context == ""


async def test_expander_down_falls_back_to_the_shared_tokenizer_without_vectors():
    pg = FakeRetriever("retriever_pg", [candidate("5689", ARTICLE, "pg.keyword", 9.0)])
    reply = (await mesh(expander=FakeExpander(fail=grpc.StatusCode.UNAVAILABLE), pg=pg).search.search(
        "劳动合同工资", 5, None, Deadline(5))).response
    assert list(reply.degraded) == ["expander"] and stages(reply)["expand"].status == DEGRADED
    request = pg.calls[0][1]
    assert "工资" in request.keywords and not request.query_embedding
    assert not request.with_embeddings  # no MMR in the default profile: no vectors shipped back


async def test_no_retriever_answering_is_unavailable_naming_both():
    use = mesh(pg=FakeRetriever("retriever_pg", fail=grpc.StatusCode.UNAVAILABLE),
               graph=FakeRetriever("retriever_graph", fail=grpc.StatusCode.UNAVAILABLE))
    with pytest.raises(DownstreamError) as err:
        await use.search.search("工资", 5, None, Deadline(5))
    assert err.value.code == grpc.StatusCode.UNAVAILABLE
    assert "retriever_pg" in err.value.message and "retriever_graph" in err.value.message


async def test_every_retriever_timing_out_is_deadline_exceeded():
    use = mesh(pg=FakeRetriever("retriever_pg", fail="hang"), graph=FakeRetriever("retriever_graph", fail="hang"))
    with pytest.raises(DownstreamError) as err:
        await use.search.search("工资", 5, None, Deadline(5))
    assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_switched_off_graph_is_not_asked():
    graph = FakeRetriever("retriever_graph", [candidate("17", "x", "graph.fulltext", 1.0)])
    reply = (await mesh(graph=graph).search.search("工资", 5, None, Deadline(5), frozenset({"graph", "pg.vector"}))).response
    assert graph.calls == []
    assert stages(reply)["retrieve.graph"].status == SKIPPED


async def test_graph_down_answer_comes_from_the_standard_retrieval_marked_degraded():
    """A trial's Answer with the graph retriever down threw away the standard
    retrieval for the fast path (fewer stages: 39 -> 36 of 45 answering
    passages first) and listed nothing as degraded."""
    use = mesh(graph=FakeRetriever("retriever_graph", fail=grpc.StatusCode.UNAVAILABLE))
    answer = await use.answerer.answer("工资", 5, None, Deadline(10))
    assert answer.strategy == gateway_pb2.FALLBACK_STRATEGY_STANDARD and answer.attempts[0].answered
    assert "retriever_graph" in answer.search.degraded
    assert answer.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE and "[1]" in answer.answer
    assert answer.citations[0].document_id == "5689"


async def test_pg_down_answer_skips_the_full_pipeline_for_the_fast_path():
    use = mesh(pg=FakeRetriever("retriever_pg", fail=grpc.StatusCode.UNAVAILABLE))
    answer = await use.answerer.answer("工资", 5, None, Deadline(10))
    standard, *rest = answer.attempts
    assert all(a.reason.startswith("skipped: retriever_pg unavailable") for a in rest[:-1])
    assert rest[-1].strategy == gateway_pb2.FALLBACK_STRATEGY_FAST_PATH and not rest[-1].answered  # PostgreSQL there too
    # what the graph found is answered from, as the best available, and says why
    assert standard.answered and standard.reason == "best available (retriever_pg unavailable)"
    assert "retriever_pg" in answer.search.degraded


async def test_llm_failure_gives_an_extractive_answer_with_llm_degraded():
    answer = await mesh(llm=FakeLlm(enabled=True, fail_reason="server_error")).answerer.answer("工资", 5, None, Deadline(10))
    assert answer.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE and answer.answer
    assert "llm" in answer.search.degraded
    generate = stages(answer.search)["generate"]
    assert generate.status == DEGRADED and generate.detail == "server_error"


async def test_llm_answer_keeps_valid_citations_only():
    llm = FakeLlm(enabled=True, answer="应当每月支付二倍的工资[1]，另见[7]。")
    answer = await mesh(llm=llm).answerer.answer("工资", 5, None, Deadline(10))
    assert answer.mode == gateway_pb2.ANSWER_MODE_LLM
    assert answer.answer == "应当每月支付二倍的工资[1]，另见。" and answer.invalid_citations_removed == 1
    assert [c.number for c in answer.citations] == [1]


async def test_the_citation_grammar_goes_with_the_answer_request_only_when_configured():
    """llm.citation_grammar sends llama.cpp's grammar field, naming one mark
    per packed source; off, the request carries no extra field."""
    plain, constrained = FakeLlm(enabled=True, answer="应当支付[1]。"), FakeLlm(enabled=True, answer="应当支付[1]。")
    await mesh(llm=plain).answerer.answer("工资", 5, None, Deadline(10))
    answer = await mesh(llm=constrained, llm_settings={"citation_grammar": True}).answerer.answer("工资", 5, None, Deadline(10))
    assert [extra for _, extra in plain.requests] == [None]
    (_, extra), = constrained.requests
    n_sources = len(re.findall(r"^\[\d+\] ", answer.search.context, re.M))
    assert n_sources == 2 and extra["grammar"].count('"]"') == 1
    assert f'"{n_sources}"' in extra["grammar"] and f'"{n_sources + 1}"' not in extra["grammar"]


async def test_llm_max_sources_shows_the_llm_only_the_first_sources():
    """llm.max_sources = 1: the prompt holds source [1] only, the grammar
    names one mark, and a mark past it is removed as invalid; the search
    response still carries the whole packed context."""
    llm = FakeLlm(enabled=True, answer="应当支付[1]，另见[2]。")
    answer = await mesh(llm=llm, llm_settings={"citation_grammar": True, "max_sources": 1}).answerer.answer(
        "工资", 5, None, Deadline(10))
    (messages, extra), = llm.requests
    prompt = messages[-1]["content"]
    assert "[1] " in prompt and "[2] " not in prompt and "[2] " in answer.search.context
    assert '"1"' in extra["grammar"] and '"2"' not in extra["grammar"]
    assert answer.answer == "应当支付[1]，另见。" and answer.invalid_citations_removed == 1


class RecordingFuser(FakeFuser):
    """Keeps every FuseRequest's top_k."""

    def __init__(self) -> None:
        super().__init__()
        self.top_ks: list[int] = []

    async def fuse(self, request, timeout):
        self.top_ks.append(request.top_k)
        return await super().fuse(request, timeout)


async def test_an_answer_judges_ten_results_and_answers_from_the_top_k_asked():
    """top_k below JUDGED_RESULTS: the search still fuses ten results for the no-answer rule, and the
    answer, its sources and its search are cut to the top_k asked."""
    hits = [candidate(f"d{i}", f"第{i}条 {ARTICLE}", "pg.keyword", 9.0 - i, vector_score=0.93 - i / 100) for i in range(8)]
    fuser = RecordingFuser()
    llm = FakeLlm(enabled=True, answer="应当支付二倍的工资[1]，另见[3]。")
    answer = await mesh(pg=FakeRetriever("retriever_pg", hits), fuser=fuser, llm=llm).answerer.answer("工资", 2, None, Deadline(10))
    assert fuser.top_ks[-1] == 10  # the final fusion (before it, sentence MaxSim fuses its own candidates)
    assert [c.document_id for c in answer.search.results] == ["d0", "d1"]
    assert len(re.findall(r"^\[\d+\] ", answer.search.context, re.M)) == 2
    (messages, _), = llm.requests
    assert "[2] " in messages[-1]["content"] and "[3] " not in messages[-1]["content"]
    assert answer.answer == "应当支付二倍的工资[1]，另见。" and [c.number for c in answer.citations] == [1]


async def test_entity_search_without_expander_searches_the_raw_query():
    graph = FakeRetriever("retriever_graph", entities=[entity("马铃薯")])
    use = mesh(expander=FakeExpander(fail=grpc.StatusCode.UNAVAILABLE), graph=graph)
    reply = await use.entities.search("马铃薯", 5, Deadline(5))
    assert [e.name for e in reply.entities] == ["马铃薯"]
    assert list(reply.degraded) == ["expander"] and reply.gate_reason == "expander unavailable"
    assert graph.calls[0][1].query == "马铃薯"


async def test_entity_retriever_without_the_rpc_is_skipped_not_degraded():
    pg = FakeRetriever("retriever_pg", fail=grpc.StatusCode.UNIMPLEMENTED)
    reply = await mesh(pg=pg, graph=FakeRetriever("retriever_graph", entities=[entity("土豆")])).entities.search("土豆", 5, Deadline(5))
    assert not reply.degraded and stages(reply)["retrieve_entities.pg"].status == SKIPPED


async def test_ingest_with_a_retriever_down_fails_with_its_status():
    use = mesh(graph=FakeRetriever("retriever_graph", fail=grpc.StatusCode.UNAVAILABLE))
    with pytest.raises(DownstreamError) as err:
        await use.documents.ingest('{"id": "1", "text": "第一条 测试。"}'.encode(), Deadline(5))
    assert err.value.code == grpc.StatusCode.UNAVAILABLE and err.value.service == "retriever_graph"


async def test_ingest_stores_in_every_retriever():
    pg, graph = FakeRetriever("retriever_pg"), FakeRetriever("retriever_graph")
    reply, failures = await mesh(pg=pg, graph=graph).documents.ingest(
        '{"id": "1", "text": "第一条 测试。"}\n{"id": "2"}'.encode(), Deadline(5))
    assert reply.received == 2 and reply.stored == 1 and len(failures) == 1
    assert pg.stored == ["1"] and graph.stored == ["1"]


async def test_retriever_pg_down_leaves_the_graph_results():
    reply = (await mesh(pg=FakeRetriever("retriever_pg", fail=grpc.StatusCode.UNAVAILABLE)).search.search(
        "工资", 5, None, Deadline(5))).response
    assert list(reply.degraded) == ["retriever_pg"]
    assert stages(reply)["retrieve.pg"].status == DEGRADED and stages(reply)["retrieve.graph"].status == OK
    assert [c.document_id for c in reply.results] == ["17"]


async def test_channels_a_profile_has_off_are_not_run_and_related_is_skipped():
    graph = FakeRetriever("retriever_graph", [candidate("17", "第十七条 劳动合同应当具备以下条款。", "graph.term", 1.0)],
                          related=[candidate("18", "第十八条", "graph.cites", 0.5)])
    reply = (await mesh(graph=graph).search.search("工资", 5, None, Deadline(5))).response
    retrieve = next(r for rpc, r in graph.calls if rpc == "retrieve")
    assert {"graph.fulltext", "graph.heading", "graph.neighbour", "graph.ppr"} <= set(retrieve.disabled_channels)
    assert "graph.offence" not in retrieve.disabled_channels and "graph.term" in retrieve.disabled_channels
    assert not any(rpc == "related" for rpc, _ in graph.calls)
    assert stages(reply)["related"].status == SKIPPED
    assert "18" not in [c.document_id for c in reply.results]


async def test_a_channel_switched_on_per_request_runs_in_the_related_call():
    graph = FakeRetriever("retriever_graph", [candidate("17", "第十七条 劳动合同应当具备以下条款。", "graph.article", 1.0)],
                          related=[candidate("18", "第十八条", "graph.cites", 0.5)])
    use = mesh(graph=graph)
    reply = (await use.search.search("工资", 5, None, Deadline(5), enabled=frozenset({"graph.cites"}))).response
    related = next(r for rpc, r in graph.calls if rpc == "related")
    assert "graph.cites" not in related.disabled_channels
    assert {"graph.ppr", "graph.version"} <= set(related.disabled_channels)
    assert [s.document_id for s in related.seeds] == ["5689", "17"]
    assert "18" in [c.document_id for c in reply.results]
    assert stages(reply)["related.graph"].status == OK
    # Switched off per request it is not run, even when also switched on.
    graph.calls.clear()
    await use.search.search("工资", 5, None, Deadline(5), disabled=frozenset({"graph.cites"}),
                            enabled=frozenset({"graph.cites"}))
    assert not any(rpc == "related" for rpc, _ in graph.calls)


async def test_graph_with_every_first_stage_channel_off_is_not_asked():
    from services.common import names

    graph = FakeRetriever("retriever_graph", [candidate("17", "第十七条", "graph.term", 1.0)])
    reply = (await mesh(graph=graph).search.search("工资", 5, None, Deadline(5),
                                                   disabled=frozenset(names.GRAPH_FIRST_STAGE))).response
    assert not any(rpc == "retrieve" for rpc, _ in graph.calls)
    assert stages(reply)["retrieve.graph"].status == SKIPPED


async def test_the_related_call_searches_the_request_scope():
    from services.common.filters import parse_filter
    from services.gateway.search.scope import Scope

    graph = FakeRetriever("retriever_graph", [candidate("17", "第十七条 劳动合同应当具备以下条款。", "graph.term", 1.0)],
                          related=[candidate("18", "第十八条", "graph.cites", 0.5)])
    scope = Scope(("law",), tuple(parse_filter('status = "现行有效"')))
    await mesh(graph=graph).search.search("工资", 5, None, Deadline(5), scope=scope, enabled=frozenset({"graph.cites"}))
    retrieve = next(r for rpc, r in graph.calls if rpc == "retrieve")
    related = next(r for rpc, r in graph.calls if rpc == "related")
    for request in (retrieve, related):
        assert list(request.collections) == ["law"]
        assert [(f.key, f.equals) for f in request.filters] == [("status", "现行有效")]


async def test_a_file_over_the_size_limit_fails_alone_with_the_limit_named():
    files = [gateway_pb2.IngestFile(name="big.txt", content="劳动合同。".encode() * 400),
             gateway_pb2.IngestFile(name="small.txt", content="劳动合同应当具备以下条款。".encode())]
    reply = await mesh(ingest={"max_file_bytes": 2048}).files.ingest(files, Deadline(10))
    big, small = reply.files
    assert big.status == gateway_pb2.FILE_STATUS_FAILED and "over the 0.00195312 MiB limit per file" in big.reason
    assert "GRAPHMESH_GATEWAY_INGEST__MAX_FILE_BYTES" in big.reason and [f.index for f in reply.failures] == [0]
    assert small.status == gateway_pb2.FILE_STATUS_STORED and reply.stored == 1


# ---- the query embedding asked beside the analysis (split_retrieval) ----------

class SlowEmbeddingExpander(FakeExpander):
    """Analyses at once; answers an Expand that asks for the embedding only
    once ``release`` is set (or fails it with ``embed_fail``)."""

    def __init__(self, embed_fail: grpc.StatusCode | None = None) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.embed_fail = embed_fail

    async def expand(self, request, timeout):
        if request.embed:
            await self.release.wait()
            if self.embed_fail is not None:
                self.calls.append(("expand", request))
                raise downstream_error("expander", self.embed_fail)
        return await super().expand(request, timeout)


class ChannelRetriever(FakeRetriever):
    """retriever_pg answering by what it was asked: the keyword hit of 5689
    to a request without a query embedding, the vector hits of 5689 and 42
    to one with it (failing that one with ``vector_fail``); its first call
    lets the expander's embedding through."""

    def __init__(self, expander: SlowEmbeddingExpander, vector_fail: grpc.StatusCode | None = None) -> None:
        super().__init__("retriever_pg")
        self.expander = expander
        self.vector_fail = vector_fail

    async def retrieve(self, request, timeout):
        self.calls.append(("retrieve", request))
        self.expander.release.set()
        if not request.query_embedding:
            return retriever_pb2.RetrieveResponse(candidates=[candidate("5689", ARTICLE, "pg.keyword", 9.0)])
        if self.vector_fail is not None:
            raise downstream_error("retriever_pg", self.vector_fail)
        vector = types_pb2.ChannelScore(channel="pg.vector", score=0.93, rank=1)
        return retriever_pb2.RetrieveResponse(candidates=[
            types_pb2.Candidate(id="5689#0", document_id="5689", text=ARTICLE, channel_scores=[vector]),
            candidate("42", "第四十二条 加班工资。", "pg.vector", 0.9)])


async def test_keyword_channels_are_asked_before_the_query_embedding_is_in():
    expander = SlowEmbeddingExpander()
    pg = ChannelRetriever(expander)
    fuser = FakeFuser()
    reply = (await mesh(expander=expander, pg=pg, fuser=fuser).search.search("工资", 5, None, Deadline(5))).response
    (_, first), (_, second) = pg.calls
    assert not first.query_embedding and list(first.keywords) == ["工资"]
    assert list(second.query_embedding) == pytest.approx([0.1, 0.2])
    assert [c for c in names.PG_CHANNELS if c not in second.disabled_channels] == ["pg.vector", "pg.centred", "pg.hyde", "pg.adapted", "pg.translated"]
    assert "pg.translated" in first.disabled_channels  # it reads the vector too: asked once, in the vector part
    [pg_list] = [lst for lst in fuser.calls[-1][1].lists if lst.producer == "retriever_pg"]
    assert [(c.id, [s.channel for s in c.channel_scores]) for c in pg_list.candidates] == [
        ("5689#0", ["pg.vector", "pg.keyword"]), ("42#0", ["pg.vector"])]
    s = stages(reply)
    assert s["expand"].status == s["embed"].status == s["retrieve.pg.vector"].status == OK and not reply.degraded
    assert [c.document_id for c in reply.results][:2] == ["5689", "42"]


async def test_a_failed_query_embedding_leaves_the_keyword_candidates():
    expander = SlowEmbeddingExpander(embed_fail=grpc.StatusCode.UNAVAILABLE)
    pg = ChannelRetriever(expander)
    reply = (await mesh(expander=expander, pg=pg).search.search("工资", 5, None, Deadline(5))).response
    assert len(pg.calls) == 1 and not pg.calls[0][1].query_embedding
    assert list(reply.degraded) == ["expander"] and stages(reply)["embed"].status == DEGRADED
    assert "5689" in [c.document_id for c in reply.results]


async def test_a_failed_vector_part_leaves_the_keyword_part():
    expander = SlowEmbeddingExpander()
    reply = (await mesh(expander=expander, pg=ChannelRetriever(expander, vector_fail=grpc.StatusCode.UNAVAILABLE))
             .search.search("工资", 5, None, Deadline(5))).response
    assert list(reply.degraded) == ["retriever_pg"] and stages(reply)["retrieve.pg.vector"].status == DEGRADED
    assert stages(reply)["retrieve.pg"].status == OK and "5689" in [c.document_id for c in reply.results]


async def test_an_embedding_in_before_retrieval_goes_in_one_request_per_retriever():
    class SlowAnalysis(FakeExpander):
        def __init__(self) -> None:
            super().__init__()
            self.embedded = asyncio.Event()

        async def expand(self, request, timeout):
            if not request.embed:
                await self.embedded.wait()
            reply = await super().expand(request, timeout)
            self.embedded.set()
            return reply

    pg = FakeRetriever("retriever_pg", [candidate("5689", ARTICLE, "pg.keyword", 9.0, vector_score=0.93)])
    reply = (await mesh(expander=SlowAnalysis(), pg=pg).search.search("工资", 5, None, Deadline(5))).response
    [(_, request)] = pg.calls
    assert list(request.query_embedding) == pytest.approx([0.1, 0.2])
    assert not set(request.disabled_channels) & set(names.PG_CHANNELS)
    assert "retrieve.pg.vector" not in stages(reply)


async def test_with_the_overlap_off_one_expand_carries_the_embedding():
    expander = FakeExpander()
    pg = FakeRetriever("retriever_pg", [candidate("5689", ARTICLE, "pg.keyword", 9.0, vector_score=0.93)])
    reply = (await mesh(expander=expander, pg=pg, overlap_query_embedding=False).search.search(
        "工资", 5, None, Deadline(5))).response
    assert [(rpc, request.embed) for rpc, request in expander.calls if rpc == "expand"] == [("expand", True)]
    [(_, request)] = pg.calls
    assert list(request.query_embedding) == pytest.approx([0.1, 0.2])
    assert "embed" not in stages(reply)


async def test_under_load_a_search_asks_one_expand_with_the_embedding():
    expander = FakeExpander()
    use = mesh(expander=expander, overlap_max_in_flight=1)
    await asyncio.gather(use.search.search("工资", 5, None, Deadline(5)), use.search.search("加班", 5, None, Deadline(5)))
    embeds = sorted((r.query, r.embed) for rpc, r in expander.calls if rpc == "expand")
    # The first search ran alone (analysis and embedding apart), the second beside it (one Expand).
    assert embeds == [("加班", True), ("工资", False), ("工资", True)]


async def test_an_invalid_query_stops_its_pending_embedding():
    class InvalidQuery(FakeExpander):
        cancelled = False

        async def expand(self, request, timeout):
            if not request.embed:
                raise downstream_error("expander", grpc.StatusCode.INVALID_ARGUMENT)
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                InvalidQuery.cancelled = True
                raise

    with pytest.raises(DownstreamError) as err:
        await mesh(expander=InvalidQuery()).search.search("工资", 5, None, Deadline(5))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    await asyncio.sleep(0.01)
    assert InvalidQuery.cancelled


class FailingRetriever(FakeRetriever):
    """retriever_pg failing every Retrieve with ``code``; its first call lets
    the expander's embedding through."""

    def __init__(self, expander: SlowEmbeddingExpander, code: grpc.StatusCode) -> None:
        super().__init__("retriever_pg")
        self.expander, self.code = expander, code

    async def retrieve(self, request, timeout):
        self.calls.append(("retrieve", request))
        self.expander.release.set()
        await asyncio.sleep(0)
        raise downstream_error("retriever_pg", self.code)


async def test_a_retriever_whose_two_parts_fail_reports_its_own_error_once():
    expander = SlowEmbeddingExpander()
    pg = FailingRetriever(expander, grpc.StatusCode.RESOURCE_EXHAUSTED)
    with pytest.raises(DownstreamError) as err:
        await mesh(expander=expander, pg=pg).search.search("工资", 5, None, Deadline(5), disabled=frozenset({"graph"}))
    assert len(pg.calls) == 2  # both parts were asked
    assert (err.value.code, err.value.service) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "retriever_pg")


async def test_an_invalid_query_does_not_count_the_expander_as_degraded():
    from services.gateway.downstream.guard import DEGRADED_TOTAL

    class Invalid(FakeExpander):
        async def expand(self, request, timeout):
            if not request.embed:
                await asyncio.sleep(0.02)  # the embedding's refusal arrives first
            raise downstream_error("expander", grpc.StatusCode.INVALID_ARGUMENT)

    before = DEGRADED_TOTAL.labels("expander")._value.get()
    with pytest.raises(DownstreamError) as err:
        await mesh(expander=Invalid()).search.search("工资", 5, None, Deadline(5))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert DEGRADED_TOTAL.labels("expander")._value.get() == before


async def test_no_vector_part_is_sent_with_every_vector_channel_switched_off():
    expander = SlowEmbeddingExpander()
    pg = ChannelRetriever(expander)
    reply = (await mesh(expander=expander, pg=pg).search.search(
        "工资", 5, None, Deadline(5), disabled=frozenset({"pg.vector", "pg.centred", "pg.hyde"}))).response
    assert len(pg.calls) == 1 and "retrieve.pg.vector" not in stages(reply)


class _EmbeddingFailsFirst(FakeExpander):
    async def expand(self, request, timeout):
        if not request.embed:
            await asyncio.sleep(0.02)
        raise RuntimeError("channel closed")  # not a DownstreamError: guarded lets it through


@pytest.mark.parametrize("expander, error", [
    (_EmbeddingFailsFirst(), RuntimeError),
    # Both calls fail at once: the embedding's call has failed when the search
    # cancels it, so its task ends in that failure rather than cancelled.
    (FakeExpander(fail=grpc.StatusCode.INVALID_ARGUMENT), DownstreamError),
], ids=["embedding_fails_first", "both_fail_at_once"])
async def test_a_failed_embedding_is_read_even_when_the_search_fails_first(expander, error):
    lost = []
    loop = asyncio.get_running_loop()
    handler = loop.get_exception_handler()
    gc.collect()  # tasks dropped by earlier tests are not this search's
    loop.set_exception_handler(
        lambda loop, ctx: lost.append(ctx["message"]) if isinstance(ctx.get("exception"), error) else None)
    try:
        with pytest.raises(error):
            await mesh(expander=expander).search.search("工资", 5, None, Deadline(5))
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(handler)
    assert lost == []


async def test_searching_a_collection_no_store_holds_says_so_in_its_timings():
    from services.gateway.search.scope import Scope

    pg = FakeRetriever("retriever_pg", [candidate("5689", ARTICLE, "pg.keyword", 9.0, vector_score=0.93)])
    pg.collections = [types_pb2.CollectionInfo(name="laws", documents=3, domain_pack="law_zh")]
    use = mesh(pg=pg)
    known = stages((await use.search.search("工资", 5, None, Deadline(5), scope=Scope(("laws",), ()))).response)
    assert "collections" not in known
    missing = stages((await use.search.search("工资", 5, None, Deadline(5), scope=Scope(("laws", "lwas"), ()))).response)
    assert missing["collections"].status == SKIPPED and "no store holds collection 'lwas':" in missing["collections"].detail
    assert missing["collections"].detail.endswith("; 'lwas' looks like 'laws'")  # 'laws' is stored: named only as the guess


async def test_an_answer_over_a_collection_no_store_holds_says_so_and_points_to_no_sources():
    from services.gateway.search.scope import Scope

    pg, graph = FakeRetriever("retriever_pg", []), FakeRetriever("retriever_graph", [])
    pg.collections = [types_pb2.CollectionInfo(name="laws", documents=3, domain_pack="law_zh")]
    reply = await mesh(pg=pg, graph=graph).answerer.answer("年假几天", 5, None, Deadline(10), scope=Scope(("nope",), ()))
    assert reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED and not reply.insufficient_sources
    note = stages(reply.search)["collections"]
    assert note.status == SKIPPED and "'nope'" in note.detail
    assert "以下是最接近的资料" not in reply.answer  # no nearest sources to point to
    assert "no store holds collection 'nope'" in stages(reply.search)["generate"].detail
    # the note is in the answer itself: in Chinese for a Chinese question (its English words stay in the timings)
    assert reply.answer.startswith("检索范围内没有可用的资料，无法回答这个问题（所选的资料集合不存在或为空")
    english = await mesh(pg=pg, graph=graph).answerer.answer("How many days of leave?", 5, None, Deadline(10),
                                                             scope=Scope(("nope",), ()))
    # in English too the reader gets a plain sentence (a trial's users of the OpenAI route read the developer's
    # note, "... (graphmesh collections list names those that exist)", as the answer); the note stays in the timings
    assert english.answer.startswith("Nothing could be searched for this question (the collection chosen does not exist")
    assert "no store holds" not in english.answer and "'nope'" in stages(english.search)["collections"].detail
    typo = await mesh(pg=pg, graph=graph).answerer.answer("年假几天", 5, None, Deadline(10), scope=Scope(("LAWS",), ()))
    assert "是要找资料集合“laws”（而不是“LAWS”）吗？" in typo.answer  # case aside, the look-alike is said
    typo = await mesh(pg=pg, graph=graph).answerer.answer("How many days of leave?", 5, None, Deadline(10),
                                                          scope=Scope(("Lwas",), ()))
    assert "'Lwas' looks like 'laws'" in stages(typo.search)["collections"].detail  # the stored name it looks like
    typo = await mesh(pg=pg, graph=graph).answerer.answer("年假几天", 5, None, Deadline(10), scope=Scope(("Lwas",), ()))
    assert "'Lwas' looks like 'laws'" in stages(typo.search)["collections"].detail  # the developer's note


async def test_an_answer_over_the_empty_default_names_the_one_collection_stored():
    """A trial's console asked the default collection and was told it is empty, not that its "wuye" is stored."""
    pg, graph = FakeRetriever("retriever_pg", []), FakeRetriever("retriever_graph", [])
    pg.collections = [types_pb2.CollectionInfo(name="wuye", documents=6, domain_pack="generic")]
    reply = await mesh(pg=pg, graph=graph).answerer.answer("物业费多少", 5, None, Deadline(10))
    assert "是要找资料集合“wuye”（而不是“default”）吗？" in reply.answer
    note = stages(reply.search)["collections"].detail
    assert note.endswith("; the only collection stored is 'wuye'") and "looks like" not in note  # a trial read it as odd
    pg.collections.append(types_pb2.CollectionInfo(name="hr", documents=2, domain_pack="generic"))
    several = await mesh(pg=pg, graph=graph).answerer.answer("物业费多少", 5, None, Deadline(10))
    assert "是要找资料集合" not in several.answer  # two stored: no guess, but both named (a trial's CLI got neither)
    assert "已存的资料集合有：“hr”、“wuye”，请选其中一个再问。" in several.answer
    assert "the collections stored are 'hr', 'wuye' (--collection NAME)" in stages(several.search)["collections"].detail
    english = await mesh(pg=pg, graph=graph).answerer.answer("How much is the fee?", 5, None, Deadline(10))
    assert "The collections stored are 'hr', 'wuye': ask one of them." in english.answer


async def test_a_filtered_search_that_finds_nothing_says_what_filters_test():
    from services.gateway.search.scope import scope_of
    empty = FakeRetriever("retriever_pg", [])
    empty.collections = [types_pb2.CollectionInfo(name="hr")]  # the collection exists; nothing in it matches
    scope = scope_of(["hr"], [types_pb2.MetadataFilter(key="dept", equals="人事")])
    reply = (await mesh(pg=empty, graph=FakeRetriever("retriever_graph", [])).search.search(
        "婚假几天", 5, None, Deadline(5), scope=scope)).response
    note = stages(reply)[names.STAGE_FILTERS]
    assert not reply.results and note.status == SKIPPED
    assert "'dept'" in note.detail and "document's own metadata" in note.detail and "page" in note.detail
    found = (await mesh().search.search("工资", 5, None, Deadline(5), scope=scope)).response
    assert found.results and names.STAGE_FILTERS not in stages(found)  # only an empty result explains itself


async def test_the_question_translation_reaches_the_retriever_the_fuser_and_the_caller():
    translation = types_pb2.QueryTranslation(script="latin", words=[
        types_pb2.TranslatedWord(word="工资", terms=["wage", "wages", "salary"], synonyms=["薪水"])])
    pg, fuser = FakeRetriever("retriever_pg"), FakeFuser()
    reply = (await mesh(expander=FakeExpander(translation=translation), pg=pg, fuser=fuser).search.search(
        "工资", 5, None, Deadline(5))).response
    assert pg.calls and all(request.translation == translation for _, request in pg.calls)
    assert fuser.calls[-1][1].translation == translation
    assert reply.query_info.translation == translation  # the caller sees what pg.translated searched
