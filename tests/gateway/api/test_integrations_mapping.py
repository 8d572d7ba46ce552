"""The pure mapping of the integrations, without servers: OpenAI chat
requests to AnswerRequests and answers to completions and chunks
(services/gateway/api/openai_compat/), MCP tool arguments to gateway
requests and replies to tool results (services/mcp_server/tools.py)."""
from __future__ import annotations

import json

import pytest

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import InvalidArgument
from services.gateway.api import openai_compat as chat
from services.mcp_server import tools

pytestmark = pytest.mark.unit


def user(text) -> dict:
    return {"role": "user", "content": text}


@pytest.mark.parametrize("name,collections,profile", [
    ("graphmesh", (), "default"), ("graphmesh:laws", ("laws",), "default"),
    ("graphmesh:laws, manuals,laws@fast", ("laws", "manuals"), "fast"), ("graphmesh@rerank", (), "rerank"),
])
def test_model_names_pick_collections_and_profile(name, collections, profile):
    model = chat.parse_model(name)
    assert (model.collections, model.profile) == (collections, profile)
    assert model.rerank is chat.PROFILES[profile]


@pytest.mark.parametrize("name,status", [("gpt-4o", 404), ("graphmesh:", 400), ("graphmesh:a b", 400), ("graphmesh@slow", 400),
                                         ("graphmesh:" + ",".join(f"c{i}" for i in range(21)), 400), (None, 400), (5, 400)])
def test_bad_model_names_are_refused_naming_the_model(name, status):
    with pytest.raises(chat.ChatError) as err:
        chat.parse_model(name)
    assert err.value.status == status and err.value.param == "model"


def test_the_question_is_the_last_user_turn_with_earlier_user_turns_before_it():
    assert chat.question_of([user("  试用期多长？ ")]) == "试用期多长？"
    turns = [user(f"第{i}个问题") for i in range(5)] + [{"role": "assistant", "content": "答[1]"}, user("那么呢？")]
    assert chat.question_of(turns) == "（上文：第2个问题；第3个问题；第4个问题）那么呢？"
    assert chat.question_of([user("What is a patent?"), user("And a utility model?")]) == \
        "(Earlier: What is a patent?) And a utility model?"
    long_turn = chat.question_of([user("长" * 1000), user("问")])
    assert len(long_turn) == len("（上文：）问") + chat.CONTEXT_TURN_CHARS


def test_only_a_follow_up_is_sent_with_the_turns_before_it():
    """A trial's "周末开门吗" after two questions about prices was answered with the prices."""
    prices = [user("挂号费多少"), user("流感疫苗多少钱")]
    assert chat.question_of([*prices, user("周末开门吗")]) == "周末开门吗"
    assert chat.question_of([user("职工医保退休的在社区看病能报多少"), user("那孩子呢？")]) == \
        "（上文：职工医保退休的在社区看病能报多少）那孩子呢？"
    assert chat.question_of([*prices, user("多少钱？")]).startswith("（上文：")  # too short to name anything
    assert chat.question_of([user("什么是实用新型？"), user("它的保护期多长？")]).startswith("（上文：")
    assert chat.question_of([user("Do you open on Saturday?"), user("What are the fees for a check-up package?")]) == \
        "What are the fees for a check-up package?"
    assert chat.question_of([user("Do you open on Saturday?"), user("What about Sunday?")]).startswith("(Earlier:")
    hospital = user("住院現金計劃啲等候期幾耐")  # Cantonese and traditional: 咁, 嗰個, 佢, 還有
    for follow_up in ("咁意外又點計？", "優越計劃嗰個幾多", "佢包唔包門診", "還有什麼要注意"):
        assert chat.question_of([hospital, user(follow_up)]).startswith("（上文：住院現金計劃"), follow_up
    assert chat.question_of([user([{"type": "text", "text": "一"}, {"type": "text", "text": "二"}])]) == "一\n二"


def test_earlier_turns_are_cut_to_fit_the_query_limit_beside_a_question_within_it():
    """A trial's 9,990-character question after one 100-character turn was refused as a 10,095-character query."""
    question, turn = "那" + "问" * 9_899, user("上" * 100)  # a follow-up: it opens with 那
    fitted = chat.question_of([turn, user(question)], max_chars=10_000)
    assert len(fitted) == 10_000 and fitted.endswith(question) and fitted.startswith("（上文：上")
    assert chat.question_of([turn, user("那" * 9_990)], max_chars=10_000) == "那" * 9_990  # the trial's: no room left
    three = [user("甲" * 150), user("乙" * 150), user("丙" * 150), user("那" * 9_700)]
    kept = chat.question_of(three, max_chars=10_000)  # the earliest turns go first
    assert len(kept) <= 10_000 and "甲" not in kept and "乙" not in kept and "丙" * 20 in kept
    assert chat.question_of([turn, user("那" * 10_001)], max_chars=10_000) == "那" * 10_001  # Answer names it
    assert chat.chat_request({"model": "graphmesh", "messages": [turn, user(question)]}, 10_000).answer.query == fitted


@pytest.mark.parametrize("messages,param", [
    (None, "messages"), ([], "messages"), ("hi", "messages"), ([user("a"), {"role": "assistant", "content": "b"}], "messages[1].role"),
    ([user("")], "messages[0].content"), ([user(5)], "messages[0].content"), (["hi"], "messages[0]"),
    ([user([{"type": "image_url"}])], "messages[0].content[0]"),
])
def test_bad_messages_name_the_message_at_fault(messages, param):
    with pytest.raises(chat.ChatError) as err:
        chat.question_of(messages)
    assert err.value.status == 400 and err.value.param == param


def test_a_chat_request_becomes_an_answer_request():
    request = chat.chat_request({"model": "graphmesh:laws@fast", "messages": [user("问")], "top_k": 5, "temperature": 0.2,
                                 "filter": 'year >= 2020', "stream": True, "n": 1})
    assert request.stream and request.model_name == "graphmesh:laws@fast"
    assert request.answer.query == "问" and request.answer.top_k == 5 and list(request.answer.collections) == ["laws"]
    assert request.answer.HasField("rerank") and request.answer.rerank is False
    assert request.answer.filters[0].key == "year"
    assert not chat.chat_request({"model": "graphmesh", "messages": [user("问")]}).answer.HasField("rerank")


@pytest.mark.parametrize("extra,param", [({"n": 2}, "n"), ({"top_k": 0.5}, "top_k"), ({"top_k": True}, "top_k"),
                                         ({"stream": 1}, "stream"), ({"filter": "a OR b"}, "filter"), ({"bogus": 1}, "bogus"),
                                         ({"response_format": {"type": "json_object"}}, "response_format"),
                                         ({"tool_choice": "auto"}, "tool_choice"), ({"logprobs": True}, "logprobs")])
def test_unsupported_or_bad_parameters_are_named(extra, param):
    with pytest.raises(chat.ChatError) as err:
        chat.chat_request({"model": "graphmesh", "messages": [user("问")], **extra})
    assert err.value.status == 400 and err.value.param == param
    assert set(err.value.body()["error"]) == {"message", "type", "param", "code"}


def answered(mode=gateway_pb2.ANSWER_MODE_LLM) -> gateway_pb2.AnswerResponse:
    return gateway_pb2.AnswerResponse(answer="二倍工资[1]。", mode=mode, strategy=gateway_pb2.FALLBACK_STRATEGY_STANDARD,
                                      citations=[gateway_pb2.Citation(number=1, candidate_id="5689#0", document_id="5689",
                                                                      label="劳动合同法 第八十二条")])


def test_a_completion_carries_the_answer_and_its_citations():
    body = chat.completion_body(answered(), "graphmesh", "chatcmpl-x", 7)
    choice = body["choices"][0]
    assert choice["message"]["content"] == "二倍工资[1]。" and choice["finish_reason"] == "stop"
    assert choice["message"]["citations"] == [{"number": 1, "document_id": "5689", "candidate_id": "5689#0",
                                               "label": "劳动合同法 第八十二条", "caveat": ""}]
    assert body["graphmesh"]["mode"] == "llm" and body["graphmesh"]["strategy"] == "standard"
    assert body["graphmesh"]["degraded"] == []


def test_the_extension_names_the_services_the_answer_was_made_without():
    """A trial's graphmesh:corp@rerank ran without a reranker and the reply gave no sign of it."""
    reply = answered()
    reply.search.degraded.extend(["reranker", "retriever_graph", "reranker"])
    assert chat.completion_body(reply, "graphmesh:corp@rerank", "chatcmpl-x", 7)["graphmesh"]["degraded"] == ["reranker",
                                                                                                             "retriever_graph"]


def test_stream_chunks_send_tokens_then_the_rest_and_the_citations():
    state = chat.StreamState()
    token = chat.stream_chunks(gateway_pb2.AnswerStreamResponse(token="二倍"), state, "c", 1, "graphmesh")
    assert token[0]["choices"][0]["delta"] == {"content": "二倍"}
    assert chat.stream_chunks(gateway_pb2.AnswerStreamResponse(stage=types_pb2.StageTiming(stage="fuse")), state, "c", 1, "m") == []
    last = chat.stream_chunks(gateway_pb2.AnswerStreamResponse(done=answered()), state, "c", 1, "graphmesh")
    assert len(last) == 1 and last[0]["choices"][0]["finish_reason"] == "stop"
    assert last[0]["choices"][0]["delta"]["citations"][0]["number"] == 1
    # nothing streamed (extractive, abstained): the whole answer as one delta first
    whole = chat.stream_chunks(gateway_pb2.AnswerStreamResponse(done=answered(gateway_pb2.ANSWER_MODE_ABSTAINED)),
                               chat.StreamState(), "c", 1, "graphmesh")
    assert whole[0]["choices"][0]["delta"] == {"content": "二倍工资[1]。"} and whole[1]["graphmesh"]["abstained"]
    # the LLM failed after some tokens: the fallback answer follows them
    failed = chat.stream_chunks(gateway_pb2.AnswerStreamResponse(done=answered(gateway_pb2.ANSWER_MODE_EXTRACTIVE)),
                                state, "c", 1, "graphmesh")
    assert failed[0]["choices"][0]["delta"]["content"].startswith("\n\n")


def test_models_and_the_edges_errors_in_openais_shape():
    laws = types_pb2.CollectionInfo(name="laws", documents=3, domain_pack="law_zh")
    body = chat.models_body([types_pb2.CollectionInfo(name="default", documents=5), laws])
    assert [m["id"] for m in body["data"]] == ["graphmesh", "graphmesh:laws"] and body["data"][1]["documents"] == 3
    # an empty default goes last, said empty: a chat page picks the first model (two trials' pages answered nothing)
    body = chat.models_body([laws])
    assert [m["id"] for m in body["data"]] == ["graphmesh:laws", "graphmesh"] and "empty" in body["data"][1]["description"]
    assert [m["id"] for m in chat.models_body([])["data"]] == ["graphmesh"]  # nothing stored at all: the default alone
    edge = {"error": {"code": 415, "status": "INVALID_ARGUMENT", "message": "Content-Type must be application/json",
                      "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                                   "fieldViolations": [{"field": "Content-Type", "description": "x"}]}]}}
    assert chat.openai_shape(edge, 415) == {"error": {"message": "Content-Type must be application/json",
                                                      "type": "invalid_request_error", "param": "Content-Type",
                                                      "code": "invalid_argument"}}


def test_mcp_tool_arguments_become_gateway_requests():
    request = tools.search_request("试用期", 3, ["laws", " "], 'status = "现行有效"')
    assert (request.query, request.top_k, list(request.collections)) == ("试用期", 3, ["laws"])
    assert request.filters[0].key == "status" and request.filters[0].equals == "现行有效"
    with pytest.raises(InvalidArgument) as err:
        tools.answer_request("q", filter="a != b")
    assert err.value.field == "filter"
    assert tools.document_name("5689") == "collections/-/documents/5689"
    assert tools.document_name("5689", "laws") == "collections/laws/documents/5689"
    assert tools.document_name("collections/x/documents/1", "laws") == "collections/x/documents/1"
    ingest = tools.ingest_request("正文", "d1", "hand", "标题", {"year": "2024"})
    assert json.loads(ingest.jsonl) == {"id": "d1", "text": "正文", "title": "标题", "metadata": {"year": "2024"}}
    assert ingest.collection == "hand" and ingest.kind == gateway_pb2.INGEST_KIND_DOCUMENTS
    for args, field in [(("", "d1"), "text"), (("x", " "), "document_id"), (("x" * (tools.MAX_INGEST_CHARS + 1), "d"), "text")]:
        with pytest.raises(InvalidArgument) as err:
            tools.ingest_request(*args)
        assert err.value.field == field


def test_gateway_replies_become_tool_results():
    result = tools.answer_result(answered(gateway_pb2.ANSWER_MODE_ABSTAINED))
    assert result["abstained"] and result["mode"] == "abstained" and result["citations"][0]["document_id"] == "5689"
    cand = types_pb2.Candidate(document_id="1", title="法", heading_path=["法", "第一条"], text="长" * 2000, fused_score=0.5,
                               channel_scores=[types_pb2.ChannelScore(channel="pg.vector")], metadata={"year": "2024"})
    hit = tools.search_result(gateway_pb2.SearchResponse(results=[cand]))["results"][0]
    assert hit["label"] == "法 第一条" and len(hit["text"]) == tools.MAX_RESULT_CHARS + 1 and hit["channels"] == ["pg.vector"]
    skipped = types_pb2.StageTiming(stage="collections", status=types_pb2.STAGE_STATUS_SKIPPED,
                                    detail="no store holds collection 'defualt'")
    assert tools.search_result(gateway_pb2.SearchResponse(timings=[skipped]))["notes"] == ["no store holds collection 'defualt'"]
    assert tools.answer_result(gateway_pb2.AnswerResponse(search=gateway_pb2.SearchResponse(timings=[skipped])))["notes"] == [
        "no store holds collection 'defualt'"]
    reply = gateway_pb2.IngestResponse(received=1, stored=1, chunks=2)
    assert tools.ingest_result(reply, tools.ingest_request("t", "d")) == {
        "document_id": "d", "collection": "default", "stored": True, "unchanged": False, "chunks": 2, "failures": []}


@pytest.mark.parametrize("details", ["Deadline Exceeded", "Stream removed"])
def test_a_chat_that_ran_out_of_its_own_deadline_says_so_in_our_words(details):
    """A trial's X-Timeout-Seconds: 0.001 got "Stream removed (Deadline Exceeded)", gRPC's words."""
    import grpc

    from services.gateway.api.edge_rules import DEADLINE_MESSAGE
    from services.gateway.api.openai_compat.replies import rpc_error

    err = rpc_error(grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details))
    assert err.status == 504 and err.message == DEADLINE_MESSAGE


def test_thanks_after_a_question_is_no_follow_up():
    # "谢谢" is four characters at most, but with the turns before it was answered as the earlier question again
    from services.gateway.api.openai_compat import question_of
    messages = [{"role": "user", "content": "公积金能取出来交房租吗"}, {"role": "assistant", "content": "可以。"},
                {"role": "user", "content": "谢谢！"}]
    assert question_of(messages) == "谢谢！"
    assert question_of([*messages[:2], {"role": "user", "content": "多少钱？"}]) == "（上文：公积金能取出来交房租吗）多少钱？"
