"""The OpenAI-compatible routes (services/gateway/api/openai_compat/), called
with the ``openai`` Python client on the real gateway (servicer,
interceptors, REST edge) over fake downstream clients: answers with their
citations, streamed and not, the model list and names, earlier turns as
context, an abstention as an ordinary reply, errors in OpenAI's shape with
the parameter at fault, and the edge's rules and API keys on these routes."""
from __future__ import annotations

import json

import openai
import pytest
from aiohttp import ClientSession

from graphmesh.common.v1 import types_pb2
from services.gateway.api.auth import new_key
from tests.fakes import FakeExpander, FakeLlm, FakeReranker, FakeRetriever, candidate

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]
QUESTION = "试用期工资是多少？"
CITED = "根据[1]，测试。"


def client(gw, api_key: str = "unused") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.rest_url + "/v1", api_key=api_key, max_retries=0, timeout=30)


def stored_pg(*names: str) -> FakeRetriever:
    pg = FakeRetriever("retriever_pg", [candidate("1", "第一条 测试。", "pg.keyword", 1.0, 0.9)])
    pg.collections = [types_pb2.CollectionInfo(name=n, documents=3, domain_pack="generic") for n in names]
    return pg


async def test_a_chat_completion_is_the_answer_with_its_citations_as_marks_and_extension(fake_gateway):
    gw = await fake_gateway(llm=FakeLlm(enabled=True, answer=CITED))
    reply = await client(gw).chat.completions.create(model="graphmesh", messages=[{"role": "user", "content": QUESTION}])
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-") and reply.model == "graphmesh"
    message = reply.choices[0].message
    assert message.role == "assistant" and "[1]" in message.content and reply.choices[0].finish_reason == "stop"
    assert message.citations == [{"number": 1, "document_id": "1", "candidate_id": "1#0", "label": "测试法 第一条", "caveat": ""}]
    assert reply.graphmesh["mode"] == "llm" and reply.graphmesh["abstained"] is False
    assert reply.graphmesh["answer"] == message.content


async def test_a_streamed_completion_sends_the_tokens_then_the_citations_and_done(fake_gateway):
    gw = await fake_gateway(llm=FakeLlm(enabled=True, answer=CITED))
    stream = await client(gw).chat.completions.create(model="graphmesh", stream=True,
                                                      messages=[{"role": "user", "content": QUESTION}])
    chunks = [chunk async for chunk in stream]
    assert all(c.object == "chat.completion.chunk" for c in chunks) and len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == CITED  # the fake LLM's two pieces, as they came
    assert len([c for c in chunks if c.choices[0].delta.content]) == 2
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert [c["number"] for c in last.choices[0].delta.citations] == [1]
    assert last.graphmesh["mode"] == "llm" and "[1]" in last.graphmesh["answer"]


async def test_a_stream_without_llm_tokens_sends_the_extractive_answer_in_one_delta(fake_gateway):
    gw = await fake_gateway()  # no LLM: extractive
    stream = await client(gw).chat.completions.create(model="graphmesh", stream=True,
                                                      messages=[{"role": "user", "content": QUESTION}])
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == chunks[-1].graphmesh["answer"] and "[1]" in text
    assert chunks[-1].graphmesh["mode"] == "extractive"


async def test_models_are_the_default_and_each_stored_collection(fake_gateway):
    gw = await fake_gateway(pg=stored_pg("default", "laws", "manuals"))
    models = await client(gw).models.list()
    assert [m.id for m in models.data] == ["graphmesh", "graphmesh:laws", "graphmesh:manuals"]
    assert all(m.object == "model" and m.owned_by == "graphmesh" for m in models.data)
    assert models.data[1].model_extra["documents"] == 3


async def test_the_model_name_picks_the_collections_and_the_profile(fake_gateway):
    pg, reranker = stored_pg("laws", "manuals"), FakeReranker()
    gw = await fake_gateway(pg=pg, reranker=reranker, rerank={"enabled": True})
    await client(gw).chat.completions.create(model="graphmesh:laws,manuals@fast", messages=[{"role": "user", "content": QUESTION}])
    retrieve = next(request for rpc, request in pg.calls if rpc == "retrieve")
    assert list(retrieve.collections) == ["laws", "manuals"]
    assert not reranker.calls  # @fast: no cross-encoder although the gateway's default runs it
    await client(gw).chat.completions.create(model="graphmesh:laws", messages=[{"role": "user", "content": QUESTION}])
    assert reranker.calls
    with pytest.raises(openai.NotFoundError) as missing:
        await client(gw).chat.completions.create(model="graphmesh:nosuch", messages=[{"role": "user", "content": QUESTION}])
    assert missing.value.code == "model_not_found" and missing.value.param == "model"
    assert "did you mean" not in missing.value.message
    with pytest.raises(openai.NotFoundError) as misspelt:  # a fresh user's graphmesh:hotl for hotel
        await client(gw).chat.completions.create(model="graphmesh:manual", messages=[{"role": "user", "content": QUESTION}])
    assert "did you mean 'graphmesh:manuals'?" in misspelt.value.message
    with pytest.raises(openai.NotFoundError):
        await client(gw).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])


async def test_earlier_user_turns_are_prepended_to_the_question(fake_gateway):
    expander = FakeExpander()
    gw = await fake_gateway(expander=expander)
    await client(gw).chat.completions.create(model="graphmesh", messages=[
        {"role": "system", "content": "你是助手"},
        {"role": "user", "content": "劳动合同法第十九条讲什么？"},
        {"role": "assistant", "content": "第十九条规定了试用期[1]。"},
        {"role": "user", "content": [{"type": "text", "text": "那第二款呢？"}]},
    ])
    queries = [request.query for rpc, request in expander.calls if rpc == "expand"]
    assert queries[0] == "（上文：劳动合同法第十九条讲什么？）那第二款呢？"
    assert not any("你是助手" in q or "第十九条规定" in q for q in queries)


class TurnsExpander(FakeExpander):
    """Keywords the first result holds only when the earlier turn is in the query."""

    async def expand(self, request, timeout):
        self.keywords = ["公积金", "房租"] if "上文" in request.query else ["一个月", "最多"]
        return await super().expand(request, timeout)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_question_refused_alone_is_asked_again_with_the_earlier_turns(fake_gateway, stream):
    """A trial's "一个月最多能取多少？" after "公积金能取出来交房租吗" names no subject, is no follow-up by its words, and
    was refused alone."""
    pg = FakeRetriever("retriever_pg", [candidate("d0", "公积金可以按月提取支付房租，每月不超过1800元。", "pg.keyword", 2.0,
                                                  vector_score=0.80)])
    pg.collections = [types_pb2.CollectionInfo(name="default", documents=1, domain_pack="generic")]
    expander = TurnsExpander()
    gw = await fake_gateway(pg=pg, expander=expander)
    messages = [{"role": "user", "content": "公积金能取出来交房租吗"}, {"role": "assistant", "content": "可以[1]。"},
                {"role": "user", "content": "一个月最多能取多少？"}]
    reply = await client(gw).chat.completions.create(model="graphmesh", messages=messages, stream=stream)
    last = [chunk async for chunk in reply][-1] if stream else reply
    assert last.graphmesh["abstained"] is False and "1800元" in last.graphmesh["answer"]
    queries = [request.query for rpc, request in expander.calls if rpc == "expand"]
    assert list(dict.fromkeys(queries)) == ["一个月最多能取多少？", "（上文：公积金能取出来交房租吗）一个月最多能取多少？"]
    # a greeting refused alone is not asked again with the turns: that would answer the earlier question
    expander.calls.clear()
    thanks = await client(gw).chat.completions.create(model="graphmesh", messages=[*messages, {"role": "user", "content": "谢谢"}])
    assert thanks.graphmesh["abstained"] is True and {r.query for rpc, r in expander.calls if rpc == "expand"} == {"谢谢"}


async def test_an_abstention_is_an_ordinary_reply_that_says_so(fake_gateway):
    pg = FakeRetriever("retriever_pg", [candidate(f"d{i}", "预算收入和预算支出以人民币元为计算单位。", "pg.keyword", 2.0, vector_score=v)
                                        for i, v in enumerate([0.84, 0.83, 0.82])])
    pg.collections = [types_pb2.CollectionInfo(name="default", documents=3, domain_pack="law_zh")]
    gw = await fake_gateway(pg=pg, expander=FakeExpander(keywords=("量子", "计算机", "原理")),
                            llm=FakeLlm(enabled=True, answer="量子[1]。"))
    reply = await client(gw).chat.completions.create(model="graphmesh", messages=[{"role": "user", "content": "量子计算机的原理是什么？"}])
    message = reply.choices[0].message
    assert reply.choices[0].finish_reason == "stop" and "资料不足" in message.content and "[1]" not in message.content
    assert message.citations == [] and reply.graphmesh["abstained"] is True
    assert [s["document_id"] for s in reply.graphmesh["insufficient_sources"]] == ["d0", "d1", "d2"]
    listed = [line for line in message.content.splitlines() if line.startswith("- ")]  # the sources it says follow
    assert listed == [f"- {s['label'] or s['document_id']}" for s in reply.graphmesh["insufficient_sources"]]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reaction_alone_gets_a_reply_not_an_error(fake_gateway, stream):
    """A trial's chat page showed "🐶？" as an HTTP 400 ("query: has no letter…"): a reaction is answered as small
    talk, after an answer ("👍") too, and asks nothing of the stores."""
    pg = stored_pg("default")
    gw = await fake_gateway(pg=pg)
    messages = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "试用期工资不得低于…"},
                {"role": "user", "content": "👍"}]
    for conversation in ([{"role": "user", "content": "🐶？"}], messages):
        if stream:
            chunks = [c async for c in await client(gw).chat.completions.create(model="graphmesh", stream=True,
                                                                                 messages=conversation)]
            text, extension = "".join(c.choices[0].delta.content or "" for c in chunks), chunks[-1].graphmesh
        else:
            reply = await client(gw).chat.completions.create(model="graphmesh", messages=conversation)
            text, extension = reply.choices[0].message.content, reply.graphmesh
        assert text.startswith("没有读到问题") and extension["abstained"] is True
    assert not [c for c in pg.calls if c[0] == "retrieve"]  # nothing was searched


BAD_INPUTS = [
    ({"messages": [{"role": "user", "content": QUESTION}]}, "model"),
    ({"model": "graphmesh:bad name", "messages": [{"role": "user", "content": QUESTION}]}, "model"),
    ({"model": "graphmesh@slow", "messages": [{"role": "user", "content": QUESTION}]}, "model"),
    ({"model": "graphmesh", "messages": []}, "messages"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "x"}]},
     "messages[1].role"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": "   "}]}, "messages[0].content"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content[0]"),
    ({"model": "graphmesh", "messages": [{"content": QUESTION}]}, "messages[0]"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}], "n": 2}, "n"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}], "top_k": 101}, "top_k"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}], "filter": "year != 3"}, "filter"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}], "frobnicate": 1}, "frobnicate"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}], "stream": "yes"}, "stream"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}],
      "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": "长" * 20_000}]}, "messages"),  # the gateway's own limit
    ({"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}], "max_tokens": "x"}, "max_tokens"),
    ({"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}], "temperature": 3}, "temperature"),
]


@pytest.mark.parametrize("body,param", BAD_INPUTS, ids=[p for _, p in BAD_INPUTS])
async def test_bad_input_is_a_400_in_openais_shape_naming_the_parameter(fake_gateway, body, param):
    gw = await fake_gateway()
    rest = dict(body)
    model, messages = rest.pop("model", openai.NOT_GIVEN), rest.pop("messages")
    with pytest.raises(openai.BadRequestError) as err:  # the other parameters as sent, past the client's own checks
        await client(gw).chat.completions.create(model=model, messages=messages, extra_body=rest)
    assert err.value.status_code == 400 and err.value.param == param, err.value.body
    assert err.value.type == "invalid_request_error" and err.value.message


async def post(url: str, data: bytes, headers: dict) -> tuple[int, dict]:
    async with ClientSession() as session:
        async with session.post(url, data=data, headers=headers) as reply:
            return reply.status, json.loads(await reply.read())


async def test_edge_rules_apply_and_answer_in_openais_shape(fake_gateway):
    gw = await fake_gateway()
    url = gw.rest_url + "/v1/chat/completions"
    body = json.dumps({"model": "graphmesh", "messages": [{"role": "user", "content": QUESTION}]}).encode()
    cases = [
        ({"Content-Type": "text/plain"}, 415, "Content-Type"),
        ({"Content-Type": "application/json", "Origin": "https://evil.example"}, 403, None),
        ({"Content-Type": "application/json", "Host": "rebind.evil.example"}, 403, None),
    ]
    for headers, status, param in cases:
        got, reply = await post(url, body, headers)
        assert got == status, (headers, reply)
        assert set(reply["error"]) == {"message", "type", "param", "code"} and reply["error"]["param"] == param
    got, reply = await post(url, b"{not json", {"Content-Type": "application/json"})
    assert got == 400 and reply["error"]["code"] == "invalid_json"
    async with ClientSession() as session:  # an unknown method on the route
        async with session.put(url, data=body, headers={"Content-Type": "application/json"}) as r:
            assert r.status == 405 and json.loads(await r.read())["error"]["type"] == "invalid_request_error"


async def test_an_api_key_is_needed_when_auth_is_on_and_bearer_is_accepted(fake_gateway):
    key, record = new_key("chat")
    gw = await fake_gateway(auth={"enabled": True, "api_keys": record.line()})
    messages = [{"role": "user", "content": QUESTION}]
    with pytest.raises(openai.AuthenticationError) as err:
        await client(gw, "gmk_00000000_" + "x" * 43).chat.completions.create(model="graphmesh", messages=messages)
    assert err.value.status_code == 401 and err.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        await client(gw).models.list()
    with pytest.raises(openai.AuthenticationError):  # streamed: refused before the first chunk
        await client(gw).chat.completions.create(model="graphmesh", messages=messages, stream=True)
    reply = await client(gw, key).chat.completions.create(model="graphmesh", messages=messages)
    assert reply.choices[0].message.content
    assert [m.id for m in (await client(gw, key).models.list()).data] == ["graphmesh"]


SURROGATE_BODIES = [
    ('{"model": "graphmesh", "messages": [{"role": "user", "content": "\\ud800 年会"}]}', "messages[0].content"),
    ('{"model": "graphmesh", "stream": true, "messages": [{"role": "user", "content": "\\udc00"}]}', "messages[0].content"),
    ('{"model": "graphmesh", "messages": [{"role": "user", "content": [{"type": "text", "text": "x\\udc00"}]}]}',
     "messages[0].content[0].text"),
    ('{"model": "graphmesh", "messages": [{"role": "user", "content": "\\ud800"}, {"role": "user", "content": "年会"}]}',
     "messages[0].content"),
    ('{"model": "graphmesh", "filter": "a = \\"\\ud800\\"", "messages": [{"role": "user", "content": "年会"}]}', "filter"),
]


@pytest.mark.parametrize("body,param", SURROGATE_BODIES, ids=[p for _, p in SURROGATE_BODIES])
async def test_an_unpaired_surrogate_escape_is_a_400_naming_where_it_is(fake_gateway, body, param):
    gw = await fake_gateway()
    status, reply = await post(gw.rest_url + "/v1/chat/completions", body.encode(), {"Content-Type": "application/json"})
    assert status == 400 and reply["error"]["param"] == param, reply
    assert reply["error"]["type"] == "invalid_request_error" and "surrogate" in reply["error"]["message"]


async def test_a_sampling_value_out_of_range_is_invalid_value_and_of_the_wrong_type_invalid_type(fake_gateway):
    gw = await fake_gateway()
    for value, code in ((5, "invalid_value"), ("hot", "invalid_type")):
        body = json.dumps({"model": "graphmesh", "temperature": value, "messages": [{"role": "user", "content": QUESTION}]})
        status, reply = await post(gw.rest_url + "/v1/chat/completions", body.encode(), {"Content-Type": "application/json"})
        assert status == 400 and reply["error"]["param"] == "temperature" and reply["error"]["code"] == code, reply


async def test_a_model_names_its_collection_in_the_one_spelling_the_stores_use():
    from services.gateway.api.openai_compat.requests import parse_model
    assert parse_model("graphmesh:Cafe\u0301,公司文档").collections == ("Café", "公司文档")


async def test_one_model_is_retrieved_by_any_name_a_chat_may_give_and_other_openai_endpoints_say_what_is_served(fake_gateway):
    """A trial's client.models.retrieve("graphmesh:corp") and /v1/completions got the transcoder's "no route"."""
    gw = await fake_gateway(pg=stored_pg("default", "corp", "hr"))
    for name in ("graphmesh", "graphmesh:corp", "graphmesh:corp,hr@rerank"):
        assert (await client(gw).models.retrieve(name)).id == name
    assert (await client(gw).models.retrieve("graphmesh:corp")).model_dump()["documents"] == 3  # the listed model, whole
    for name in ("graphmesh:nope", "gpt-4o"):
        with pytest.raises(openai.NotFoundError) as err:
            await client(gw).models.retrieve(name)
        assert err.value.code == "model_not_found"
    async with ClientSession() as session:
        for path in ("/v1/completions", "/v1/embeddings"):
            async with session.post(gw.rest_url + path, json={"model": "graphmesh", "input": "x"}) as reply:
                error = (await reply.json())["error"]
                assert reply.status == 404 and set(error) == {"message", "type", "param", "code"}, error
                assert error["code"] == "unknown_url" and "/v1/chat/completions" in error["message"]
