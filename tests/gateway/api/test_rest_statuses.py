"""HTTP statuses of the REST transcoder beyond 400: the real REST app over a
real gateway gRPC server whose downstream services are fakes. Each status
comes from the gRPC code the gateway answered (AIP-193 mapping), in the
google.rpc.Status JSON shape; a failure after a stream has started is sent
as a last error event."""
from __future__ import annotations

import json

import grpc
import pytest
from aiohttp import ClientSession

from services.gateway.api.rest import HTTP_STATUS
from tests.fakes import FakeFuser, FakeLlm, FakeRetriever

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


class BrokenFuser(FakeFuser):
    """A fuser whose client raises a plain bug (not a DownstreamError)."""

    async def fuse(self, request, timeout):
        raise RuntimeError("bug in the fake")


class StreamThenFail(FakeLlm):
    """An LLM that writes one piece, then breaks with an unexpected error."""

    async def stream(self, messages, max_tokens, timeout=None, purpose="answer", extra=None):
        yield "应当"
        raise RuntimeError("connection torn in the fake")


async def rest(fake_gateway, **fakes) -> str:
    """The REST base URL of a gateway over ``fakes``."""
    return (await fake_gateway(**fakes)).rest_url


async def post(url: str, body: object, accept: str = "application/json") -> tuple[int, str]:
    async with ClientSession() as session:
        async with session.post(url, data=json.dumps(body, ensure_ascii=False), headers={"Accept": accept, "Content-Type": "application/json"}) as reply:
            return reply.status, await reply.text()


async def test_no_retriever_answering_is_503(fake_gateway):
    url = await rest(fake_gateway, pg=FakeRetriever("retriever_pg", fail=grpc.StatusCode.UNAVAILABLE),
                     graph=FakeRetriever("retriever_graph", fail=grpc.StatusCode.UNAVAILABLE))
    status, body = await post(url + "/v1/query:search", {"query": "测试"})
    error = json.loads(body)["error"]
    assert status == 503 and error["status"] == "UNAVAILABLE" and "retriever_pg" in error["message"]


async def test_every_retriever_timing_out_is_504(fake_gateway):
    url = await rest(fake_gateway, pg=FakeRetriever("retriever_pg", fail="hang"), graph=FakeRetriever("retriever_graph", fail="hang"))
    status, body = await post(url + "/v1/query:search", {"query": "测试"})
    assert status == 504 and json.loads(body)["error"]["status"] == "DEADLINE_EXCEEDED"


async def test_an_unexpected_error_is_500_without_a_trace(fake_gateway):
    url = await rest(fake_gateway, fuser=BrokenFuser())
    status, body = await post(url + "/v1/query:search", {"query": "测试"})
    error = json.loads(body)["error"]
    assert status == 500 and error["status"] == "INTERNAL"
    assert "Traceback" not in body and "bug in the fake" not in body


async def test_unknown_route_and_method_answer_json(fake_gateway):
    url = await rest(fake_gateway)
    status, body = await post(url + "/v1/query:nothing", {"query": "测试"})
    assert status == 404 and json.loads(body)["error"]["status"] == "NOT_FOUND"
    async with ClientSession() as session:
        async with session.get(url + "/v1/query:search") as reply:
            assert reply.status == 405 and (await reply.json())["error"]["status"] == "METHOD_NOT_ALLOWED"


async def test_error_after_the_stream_started_is_the_last_event(fake_gateway):
    url = await rest(fake_gateway, llm=StreamThenFail(enabled=True))
    status, body = await post(url + "/v1/query:answerStream", {"query": "测试"}, accept="text/event-stream")
    events = [json.loads(line[len("data: "):]) for line in body.splitlines() if line.startswith("data: ")]
    assert status == 200 and events[0].get("stage")  # the stream had started
    assert any(e.get("token") == "应当" for e in events)
    assert events[-1]["error"]["status"] == "INTERNAL" and events[-1]["error"]["code"] == 500


async def test_status_table_follows_aip_193():
    assert HTTP_STATUS[grpc.StatusCode.NOT_FOUND] == 404
    assert HTTP_STATUS[grpc.StatusCode.RESOURCE_EXHAUSTED] == 429
    assert HTTP_STATUS[grpc.StatusCode.UNAUTHENTICATED] == 401
    assert HTTP_STATUS[grpc.StatusCode.FAILED_PRECONDITION] == 400


def test_a_status_whose_message_differs_from_the_grpc_message_is_a_400_not_a_crash():
    # Regression (issue 26, schemathesis, 1 of 1,000 GET /v1/{name} cases with
    # a deadline of 1e-184 s): the client's copy of grpc-message was left
    # percent-encoded, rpc_status.from_call raised ValueError (message
    # mismatch) and aiohttp answered a plain-text 500.
    from google.protobuf import any_pb2
    from google.rpc import error_details_pb2, status_pb2

    from services.gateway.api.rest import _rpcerror_body

    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.BadRequest(field_violations=[{"field": "name", "description": "bad"}]))
    status = status_pb2.Status(code=3, message="name: '×ù' is not a collection name", details=[detail])
    err = grpc.aio.AioRpcError(grpc.StatusCode.INVALID_ARGUMENT, grpc.aio.Metadata(),
                               grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString())),
                               details="name: '%C3%97%C3%B9' is not a collection name")
    reply = _rpcerror_body(err)
    body = json.loads(reply.text)["error"]
    assert reply.status == 400 and body["status"] == "INVALID_ARGUMENT"
    assert body["message"] == "name: '×ù' is not a collection name"
    assert body["details"][0]["fieldViolations"] == [{"field": "name", "description": "bad"}]


@pytest.mark.parametrize("details", ["Deadline Exceeded", "Stream removed"])
def test_a_call_that_ran_out_of_its_own_deadline_is_a_504_in_our_words(details):
    # gRPC's own words for a deadline the REST call itself ran out of (X-Timeout-Seconds: 0.001)
    from services.gateway.api.rest import DEADLINE_MESSAGE, _rpcerror_body

    err = grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)
    reply = _rpcerror_body(err)
    body = json.loads(reply.text)["error"]
    assert reply.status == 504 and body["status"] == "DEADLINE_EXCEEDED"
    assert body["message"] == DEADLINE_MESSAGE and "X-Timeout-Seconds" in body["message"]


def test_a_stream_that_ran_out_of_its_own_deadline_ends_with_our_words():
    """A second trial's answerStream ended with gRPC's "Stream removed (Deadline Exceeded)"."""
    from google.rpc import status_pb2

    from services.gateway.api.rest import DEADLINE_MESSAGE, stream_error

    err = grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata(),
                               details="Stream removed (Deadline Exceeded)")
    assert {k: v for k, v in stream_error(err)["error"].items() if k != "details"} == {
        "code": 504, "status": "DEADLINE_EXCEEDED", "message": DEADLINE_MESSAGE}
    said = "retrievers: no retrieval finished within the request's deadline"
    ours = grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(),
                                grpc.aio.Metadata(("grpc-status-details-bin", status_pb2.Status(code=4, message=said)
                                                   .SerializeToString())), details=said)
    assert stream_error(ours)["error"]["message"] == "retrievers: no retrieval finished within the request's deadline"


async def test_an_ingest_with_neither_records_nor_files_says_what_to_give(fake_gateway):
    url = await rest(fake_gateway)
    status, body = await post(url + "/v1/documents:ingest", {"collection": "h", "files": []})
    error = json.loads(body)["error"]
    assert status == 400 and error["status"] == "INVALID_ARGUMENT"
    assert "neither JSONL records nor files" in error["message"] and "files (one file at least)" in error["message"]


async def test_a_body_led_by_a_utf8_byte_order_mark_is_read_as_json(fake_gateway):
    """A trial's body saved by an editor with a BOM was told "body: must be a JSON object"."""
    url = await rest(fake_gateway)
    body = "\ufeff" + json.dumps({"query": "年假", "top_k": 3}, ensure_ascii=False)
    async with ClientSession() as session:
        for path in ("/v1/query:search", "/v1/chat/completions"):
            sent = body if path.endswith("search") else "\ufeff" + json.dumps(
                {"model": "graphmesh", "messages": [{"role": "user", "content": "年假"}]}, ensure_ascii=False)
            async with session.post(url + path, data=sent.encode("utf-8"), headers={"Content-Type": "application/json"}) as reply:
                assert reply.status == 200, (path, await reply.text())
