"""The Answer path with the real local LLM (llama.cpp, Qwen2.5-Coder-0.5B
Q4_K_M) over the real mesh (PostgreSQL+pgvector, Neo4j, gRPC on loopback):
grounded answers with citations, the fallback chain, the fast path when the
graph service is down, DeepSearch's growth-rate stop, and a cancelled stream
stopping the LLM. Token caps are small: the model writes ~5-20 tokens/s here.
"""
from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

import grpc
import pytest

import domains
import pytest_asyncio
from prometheus_client import REGISTRY

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.text import citation_numbers

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "law_sample.jsonl"
TWO_X_WAGES = "用人单位超过一个月不满一年未与劳动者订立书面劳动合同，应当向劳动者每月支付多少工资？"
pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.e2e]


async def start_gateway(mesh, llm_url: str | None, expander_addr: str | None = None, graph_down: bool = False, **overrides):
    """A gateway (gRPC only) on the running mesh's services, with the LLM."""
    from services.common.server import create_server
    from services.common.settings import MeshAddresses, nested_update
    from services.gateway.config import GatewaySettings
    from services.gateway.server import build
    from tests.fixtures.mesh import refused_address

    addresses = {f"{n}_addr": a for n, a in mesh.addresses.items() if n != "gateway"}
    if expander_addr:
        addresses["expander_addr"] = expander_addr
    if graph_down:
        addresses["retriever_graph_addr"] = refused_address()
    settings = dict(port=0, rest={"port": -1}, deadlines={"retrieve": 20.0, "default": 300.0}, budget_chars=700,
                    llm={"max_tokens": 40, "timeout": 120.0},
                    deep={"partial_max_tokens": 32, "partial_context_chars": 500},
                    strategy_timeouts={"standard": 60.0, "expanded_query": 90.0, "hyde": 90.0, "entity_names": 60.0,
                                       "fast_path": 60.0, "sub_queries": 90.0})
    if llm_url:
        settings["llm"]["base_url"] = llm_url
    service, _ = await build(GatewaySettings(**nested_update(settings, overrides)), MeshAddresses(**addresses))
    server, port, _ = await create_server(service)
    return server, service, f"127.0.0.1:{port}"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def llm_expander(mesh, local_llm, tmp_path_factory):
    """An expander whose Rewrite RPC uses the local LLM."""
    from services.common.server import create_server
    from services.expander.config import ExpanderSettings
    from services.expander.server import build

    cache = tmp_path_factory.mktemp("emb-llm") / "cache.sqlite"
    service, _ = await build(ExpanderSettings(port=0, embedding={"cache": str(cache)},
                                              llm={"base_url": local_llm, "timeout": 90.0}, library={"addr": "none"}))
    server, port, _ = await create_server(service)
    yield f"127.0.0.1:{port}"
    await server.stop(0)
    await service.on_stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ingested(mesh):
    async with grpc.aio.insecure_channel(mesh.gateway) as ch:
        reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Ingest(gateway_pb2.IngestRequest(jsonl=SAMPLE.read_bytes(), domain_pack="law_zh"), timeout=300)
    assert reply.stored + reply.unchanged == reply.received
    return reply


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def llm_gateway(mesh, local_llm, llm_expander, ingested):
    server, service, address = await start_gateway(mesh, local_llm, llm_expander)
    channel = grpc.aio.insecure_channel(address)
    yield gateway_pb2_grpc.GatewayServiceStub(channel)
    await channel.close()
    await server.stop(0)
    await service.on_stop()


def _decoded(slot: dict) -> int:
    """Tokens the slot generated for its last request (llama.cpp /slots)."""
    token = slot.get("next_token")
    if isinstance(token, list):  # newer llama.cpp: one entry per sequence
        token = token[0] if token else {}
    return int((token or {}).get("n_decoded", slot.get("n_decoded", -1)))


def _slots(llm_url: str) -> list[dict]:
    with urllib.request.urlopen(llm_url.removesuffix("/v1") + "/slots", timeout=5) as reply:
        return json.loads(reply.read())


async def test_llm_answer_cites_only_existing_sources(llm_gateway):
    """The LLM's answer keeps only marks of existing sources and never names
    an article no source holds: qwen0.5b sometimes names the wrong article
    (第四十二条 for 第八十二条); such a sentence is removed and listed, and
    when nothing supported is left the answer quotes the sources instead."""
    reply = await llm_gateway.Answer(gateway_pb2.AnswerRequest(query=TWO_X_WAGES, top_k=3), timeout=300)
    stages = {t.stage: t for t in reply.search.timings}
    assert reply.mode in (gateway_pb2.ANSWER_MODE_LLM, gateway_pb2.ANSWER_MODE_EXTRACTIVE), reply.search.degraded
    assert stages["generate"].status == types_pb2.STAGE_STATUS_OK and not reply.search.degraded
    assert reply.answer and "```" not in reply.answer
    n_sources = reply.search.context.count("\n[") + (1 if reply.search.context.startswith("[") else 0)
    cited = set(citation_numbers(reply.answer))
    # The model's own marks (before verification) are in citation_checks; a
    # mark whose sentence its source does not support is removed and the
    # sentence listed.
    marked = {c.cited for c in reply.citation_checks if c.cited}
    assert marked, f"the model cited nothing: {reply.answer!r}"
    assert all(1 <= n <= n_sources for n in marked | cited), (marked, cited, n_sources)
    removed = [c for c in reply.citation_checks if c.outcome == gateway_pb2.CITATION_OUTCOME_UNSUPPORTED]
    assert len(reply.unsupported_sentences) == reply.unsupported_count >= len(removed)
    assert cited or removed, reply.answer
    assert {c.number for c in reply.citations} == cited
    assert all(c.candidate_id and c.document_id for c in reply.citations)
    assert reply.strategy == gateway_pb2.FALLBACK_STRATEGY_STANDARD
    assert reply.attempts[0].answered and reply.attempts[0].evidence_score > 0
    # no article the answer names is missing from its sources
    rules = domains.citation_rules(["law_zh"])
    held = set().union(*(rules.cited_units(block) for block in reply.search.context.split("\n[")))
    assert all(any(n == hn for _, hn in held) for _, n in rules.cited_units(reply.answer)), reply.answer
    if reply.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE:
        assert "unsupported by the sources" in stages["generate"].detail
        assert any("which no source holds" in s.reason or "removed" in s.reason for s in reply.unsupported_sentences)


async def test_weak_standard_retrieval_is_answered_by_a_later_strategy(mesh, local_llm, llm_expander, llm_gateway):
    # The standard strategy's own evidence score, measured the same way the
    # chain measures it (over its first JUDGED_RESULTS results: a lay question's
    # pg.adapted hits may fill the first three); the gateway then demands more than that.
    from services.gateway.answer.fallback_chain import JUDGED_RESULTS
    from services.gateway.answer.fallback_rules import evidence_score

    query = "没签合同的话老板要多给钱吗"
    probe = await llm_gateway.Search(gateway_pb2.SearchRequest(query=query, top_k=JUDGED_RESULTS), timeout=120)

    standard_evidence = evidence_score(probe.results)
    # Abstention off: this test is about the chain's evidence verdict, not
    # whether a lay question's evidence is answerable.
    server, service, address = await start_gateway(mesh, local_llm, llm_expander,
                                                   min_evidence_score=standard_evidence + 1e-4,
                                                   abstention={"enabled": False})
    try:
        async with grpc.aio.insecure_channel(address) as ch:
            reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Answer(gateway_pb2.AnswerRequest(query=query, top_k=3), timeout=600)
    finally:
        await server.stop(0)
        await service.on_stop()
    first = reply.attempts[0]
    assert first.strategy == gateway_pb2.FALLBACK_STRATEGY_STANDARD and not first.answered
    assert first.reason.startswith("evidence"), first.reason
    assert reply.strategy not in (gateway_pb2.FALLBACK_STRATEGY_STANDARD, gateway_pb2.FALLBACK_STRATEGY_UNSPECIFIED)
    answering = [a for a in reply.attempts if a.answered]
    assert len(answering) == 1 and answering[0].strategy == reply.strategy
    assert answering[0].evidence_score >= standard_evidence + 1e-4, "accepted on its evidence, not as best available"
    assert answering[0].query and answering[0].query != query
    assert all(a.reason for a in reply.attempts if not a.answered)
    assert reply.answer and reply.search.results


async def test_graph_down_answers_from_the_standard_retrieval(mesh, ingested):
    server, service, address = await start_gateway(mesh, None, graph_down=True)
    try:
        async with grpc.aio.insecure_channel(address) as ch:
            reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Answer(gateway_pb2.AnswerRequest(query=TWO_X_WAGES, top_k=3), timeout=300)
    finally:
        await server.stop(0)
        await service.on_stop()
    assert reply.strategy == gateway_pb2.FALLBACK_STRATEGY_STANDARD and reply.attempts[0].answered
    assert list(reply.search.degraded) == ["retriever_graph"]
    stages = {t.stage: t for t in reply.search.timings}
    assert stages["retrieve.graph"].status == types_pb2.STAGE_STATUS_DEGRADED and stages["retrieve.pg"].status == types_pb2.STAGE_STATUS_OK
    assert "5689" in [c.document_id for c in reply.search.results]
    assert reply.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE and "5689" in [c.document_id for c in reply.citations]


async def test_deep_search_stops_on_the_growth_rate_rule(llm_gateway):
    threshold = 1.0  # any iteration that finds fewer new chunks than it already knows stops the loop
    reply = await llm_gateway.DeepSearch(
        gateway_pb2.DeepSearchRequest(query=TWO_X_WAGES, top_k=5, max_iterations=3, sub_queries=1, growth_threshold=threshold), timeout=600
    )
    assert len(reply.iterations) >= 2
    last = reply.iterations[-1]
    assert reply.stop_reason.startswith("growth rate"), reply.stop_reason
    assert last.growth_rate < threshold
    assert last.growth_rate == pytest.approx(len(last.new_chunk_ids) / last.known_chunks)
    first = reply.iterations[0]
    assert list(first.queries) == [TWO_X_WAGES] and first.growth_rate == 1.0 and first.new_chunk_ids
    assert first.proposed and first.partial_answer
    # The next round asks the best-scored proposal not asked before.
    assert list(reply.iterations[1].queries) == [p.text for p in first.proposed if p.text != TWO_X_WAGES][:1]
    assert all(-1.0 <= p.score <= 1.0 for p in first.proposed)
    assert [p.score for p in first.proposed] == sorted((p.score for p in first.proposed), reverse=True)
    assert len(reply.evidence_ids) == sum(len(i.new_chunk_ids) for i in reply.iterations)
    assert reply.answer.answer and reply.answer.mode == gateway_pb2.ANSWER_MODE_LLM


async def test_cancelled_stream_stops_the_llm_call(mesh, local_llm, llm_expander, ingested):
    server, service, address = await start_gateway(mesh, local_llm, llm_expander, llm={"max_tokens": 400})
    before = REGISTRY.get_sample_value("graphmesh_llm_calls_total", {"purpose": "answer", "outcome": "cancelled"}) or 0.0
    try:
        async with grpc.aio.insecure_channel(address) as ch:
            call = gateway_pb2_grpc.GatewayServiceStub(ch).AnswerStream(gateway_pb2.AnswerStreamRequest(query=TWO_X_WAGES, top_k=3), timeout=300)
            stages, tokens = [], []
            async for event in call:
                if event.HasField("stage"):
                    stages.append(event.stage.stage)
                elif event.HasField("token"):
                    tokens.append(event.token)
                    break
            assert tokens, "no answer token arrived"
            assert {"expand", "retrieve.pg", "fuse", "strategy.standard"} <= set(stages)
            call.cancel()
            # The LLM slot goes idle having written fewer than the 400 tokens
            # it was allowed: the generation was stopped, not finished.
            while True:
                slots = await asyncio.to_thread(_slots, local_llm)
                if not any(s.get("is_processing") for s in slots):
                    break
                await asyncio.sleep(0.2)
            decoded = [_decoded(s) for s in slots]
            assert decoded and max(decoded) < 400, slots
    finally:
        await server.stop(0)
        await service.on_stop()
    after = REGISTRY.get_sample_value("graphmesh_llm_calls_total", {"purpose": "answer", "outcome": "cancelled"})
    assert after == before + 1


# ---- without an LLM: the chain still runs (no HyDE), answers extractively ----

@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def plain_stub(mesh, ingested):
    async with grpc.aio.insecure_channel(mesh.gateway) as ch:
        yield gateway_pb2_grpc.GatewayServiceStub(ch)


async def test_without_llm_the_chain_skips_hyde_and_answers_extractively(mesh, ingested):
    # Demand more evidence than any retrieval has: every strategy is tried.
    server, service, address = await start_gateway(mesh, None, min_evidence_score=1.01)
    try:
        async with grpc.aio.insecure_channel(address) as ch:
            reply = await gateway_pb2_grpc.GatewayServiceStub(ch).Answer(gateway_pb2.AnswerRequest(query=TWO_X_WAGES, top_k=3), timeout=300)
    finally:
        await server.stop(0)
        await service.on_stop()
    by_strategy = {a.strategy: a for a in reply.attempts}
    assert list(by_strategy) == [1, 2, 3, 4, 5]  # the reference order
    assert by_strategy[gateway_pb2.FALLBACK_STRATEGY_HYDE].reason.startswith("skipped: no LLM for HyDE")
    assert by_strategy[gateway_pb2.FALLBACK_STRATEGY_EXPANDED_QUERY].query  # the keyword rewrite ran
    assert by_strategy[gateway_pb2.FALLBACK_STRATEGY_ENTITY_NAMES].query.startswith(TWO_X_WAGES)
    answered = [a for a in reply.attempts if a.answered]
    assert len(answered) == 1 and answered[0].reason.startswith("best available")
    assert reply.strategy == answered[0].strategy
    assert reply.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE and "[1]" in reply.answer


def _post_stream(url: str, body: dict, accept: str) -> tuple[str, list[str]]:
    request = urllib.request.Request(url, data=json.dumps(body, ensure_ascii=False).encode(),
                                     headers={"Content-Type": "application/json", "Accept": accept}, method="POST")
    with urllib.request.urlopen(request, timeout=300) as reply:
        return reply.headers["Content-Type"], reply.read().decode().splitlines()


async def test_rest_answer_stream_as_server_sent_events_and_json_lines(mesh, ingested):
    url = mesh.rest_url + "/v1/query:answerStream"
    ctype, lines = await asyncio.to_thread(_post_stream, url, {"query": TWO_X_WAGES, "topK": 3}, "text/event-stream")
    assert ctype.startswith("text/event-stream")
    events = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    stages = [e["stage"]["stage"] for e in events if "stage" in e]
    assert stages[:1] == ["expand"] and "fuse" in stages and "strategy.standard" in stages
    assert "done" in events[-1] and events[-1]["done"]["answer"] and events[-1]["done"]["strategy"] == "FALLBACK_STRATEGY_STANDARD"
    ctype, lines = await asyncio.to_thread(_post_stream, url, {"query": TWO_X_WAGES, "topK": 3}, "application/json")
    assert ctype.startswith("application/x-ndjson")
    assert "done" in json.loads(lines[-1])


async def test_stream_and_deep_search_reject_bad_input_naming_the_field(plain_stub, mesh):
    from services.common.errors import field_violations

    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in plain_stub.AnswerStream(gateway_pb2.AnswerStreamRequest(query="  "), timeout=30):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(err.value)[0][0] == "query"
    for request, field in [
        (gateway_pb2.DeepSearchRequest(query="劳动合同", max_iterations=9), "max_iterations"),
        (gateway_pb2.DeepSearchRequest(query="劳动合同", sub_queries=-1), "sub_queries"),
        (gateway_pb2.DeepSearchRequest(query="劳动合同", growth_threshold=1.5), "growth_threshold"),
        (gateway_pb2.DeepSearchRequest(query=""), "query"),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await plain_stub.DeepSearch(request, timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(err.value)[0][0] == field
    status, body = await asyncio.to_thread(_post_json, mesh.rest_url + "/v1/query:answerStream", {"query": ""})
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"


def _post_json(url: str, body: dict) -> tuple[int, dict]:
    import urllib.error

    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


async def test_deep_search_without_llm_iterates_on_keyword_sub_queries(plain_stub):
    # A growth threshold this small stops only a round that finds nothing new.
    reply = await plain_stub.DeepSearch(
        gateway_pb2.DeepSearchRequest(query=TWO_X_WAGES, top_k=5, max_iterations=2, growth_threshold=1e-9), timeout=300)
    assert len(reply.iterations) == 2, reply.stop_reason
    first, second = reply.iterations
    assert first.growth_rate == 1.0 and first.new_chunk_ids
    assert first.proposed and list(second.queries) == [p.text for p in first.proposed[:3]]
    assert second.new_chunk_ids and second.growth_rate == pytest.approx(len(second.new_chunk_ids) / len(first.new_chunk_ids))
    assert reply.stop_reason == "max iterations 2"
    assert reply.answer.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE and "5689" in [c.document_id for c in reply.answer.citations] + [
        c.document_id for c in reply.answer.search.results]


async def test_streamed_evaluation_keeps_the_models_own_text_under_the_citation_grammar(mesh, local_llm, llm_expander, ingested):
    """graphmesh eval's streamed answers (run_queries stream=True) keep what
    the model wrote, before checks, and its first-token time; with the
    gateway's citation grammar on, every sentence the model wrote carries a
    mark of a packed source."""
    from services.cli.evaluate import run_queries
    from services.common.citation_check import marked_sentences

    server, service, address = await start_gateway(mesh, local_llm, llm_expander, llm={"citation_grammar": True})
    try:
        row, = await run_queries(address, [{"id": "q", "query": TWO_X_WAGES, "gold": []}], 3, 1, 300.0,
                                 answers=True, judge_address=mesh.addresses["judge"], stream=True)
    finally:
        await server.stop(0)
        await service.on_stop()
    assert not row.error and row.answer_mode in ("llm", "extractive"), row
    assert row.raw_answer and 0 < row.first_token_ms <= row.latency_ms
    sentences = marked_sentences(row.raw_answer)
    n_sources = len(row.contexts)
    assert sentences and all(marks and all(1 <= n <= n_sources for n in marks) for _, marks in sentences), row.raw_answer
